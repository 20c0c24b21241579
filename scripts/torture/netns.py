"""Hosts that are really apart: one network namespace each, joined to the root namespace by
a veth pair of its own (10.213.N.1 on the root side, 10.213.N.2 inside), with nothing
routed anywhere else. Everything made here is removed by `teardown`, also after a failure.
"""

import os
import subprocess

SUBNET = "10.213"


def run(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def can_make_namespaces():
    """Why this machine cannot run the harness, or None."""
    if os.geteuid() != 0:
        return "creating network namespaces needs root (ip netns, veth pairs)"
    name = f"scion-probe-{os.getpid()}"
    p = run("ip", "netns", "add", name, check=False)
    if p.returncode != 0:
        return f"`ip netns add` failed: {p.stderr.strip()}"
    run("ip", "netns", "del", name, check=False)
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"):
        return "libfaketime is missing (Debian package faketime)"
    return None


class Net:
    def __init__(self, run_id, hosts):
        self.run_id = run_id
        self.hosts = hosts
        self.made = []

    def ns(self, n):
        return f"scion-t{self.run_id}-h{n}"

    def link(self, n):
        # Interface names are at most 15 bytes.
        return f"sct{self.run_id % 10000}h{n}"

    def store_addr(self, n):
        """The root side of host n's link: where host n reaches the store."""
        return f"{SUBNET}.{n}.1"

    def setup(self):
        for n in range(self.hosts):
            ns, outside, inside = self.ns(n), self.link(n), self.link(n) + "p"
            run("ip", "netns", "add", ns)
            self.made.append(n)
            run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
            run("ip", "link", "set", inside, "netns", ns)
            run("ip", "addr", "add", f"{self.store_addr(n)}/24", "dev", outside)
            run("ip", "link", "set", outside, "up")
            run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{SUBNET}.{n}.2/24",
                "dev", inside)
            run("ip", "netns", "exec", ns, "ip", "link", "set", inside, "up")
            run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def partition(self, n, down):
        run("ip", "link", "set", self.link(n), "down" if down else "up")
        if not down:
            # A link set down loses its address's route: give it back.
            run("ip", "addr", "replace", f"{self.store_addr(n)}/24", "dev", self.link(n),
                check=False)

    def exec_argv(self, n):
        """The prefix that runs a command as host n: its network, UTS and pid namespaces."""
        return ["ip", "netns", "exec", self.ns(n), "unshare", "--uts", "--pid", "--fork",
                "--mount-proc", "--kill-child"]

    def teardown(self):
        for n in self.made:
            run("ip", "link", "del", self.link(n), check=False)
            run("ip", "netns", "del", self.ns(n), check=False)
        self.made = []
