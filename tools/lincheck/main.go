// lincheck checks a recorded history of branch-head operations for linearizability with
// porcupine, one branch at a time.
//
//	lincheck [--timeout 60s] [--json] HISTORY.jsonl ...
//
// Each line of a history file is one operation a client ran against a scion store:
//
//	{"branch":"torture@b0","client":3,"call":123,"ret":456,"op":"cas","from":4,"to":5,"outcome":"ok"}
//
// call and ret are nanoseconds of one clock every client shares (CLOCK_MONOTONIC); ret
// is absent for an operation whose client died before it answered. op is one of
//
//	read     the head was seen at version `value` (-1: the branch did not exist)
//	cas      a commit onto a head at version `from` that made version `to` (from and to
//	         absent: a commit whose base is not known, onto whatever the head was, which
//	         makes the next version)
//	create   a fork that made the branch, at version `to` (absent when unknown)
//	destroy  the branch was removed
//
// and outcome is ok, fail (refused: it must have changed nothing) or unknown (it may or
// may not have taken effect: a timeout, a lost answer, a killed client). The model of a
// branch is its head: a version, or absent. Exit status: 0 when every branch's history is
// linearizable, 1 when one is not, 2 when the check could not be decided or read.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// A head state: a version, absentHead, existsUnknown (made by a fork whose answer was
// lost: some version, learned from the first operation that names one), or claimedHead.
const (
	absentHead    int64 = -1
	existsUnknown int64 = -2
	// The base of a commit whose answer never came, when the client did not know it.
	anyBase int64 = -3
	// Claimed by a destroy that did not answer. scion's destroy claims the ref before it
	// removes anything: from then on the branch reads as absent, refuses commits and
	// forks onto its name, and a destroy of it finishes the job and answers ok.
	claimedHead int64 = -4
)

type record struct {
	Branch  string `json:"branch"`
	Client  int    `json:"client"`
	Call    int64  `json:"call"`
	Ret     *int64 `json:"ret"`
	Op      string `json:"op"`
	From    *int64 `json:"from"`
	To      *int64 `json:"to"`
	Value   int64  `json:"value"`
	Outcome string `json:"outcome"`
}

type input struct {
	op   string
	from int64
	to   int64 // existsUnknown when a create's version is not known
}

type output struct {
	outcome string
	value   int64
}

// step gives every state the head may be in after the operation, or none when the
// operation could not have answered as it did from `state`.
func step(s, in, out interface{}) []interface{} {
	state := s.(int64)
	i, o := in.(input), out.(output)
	if state != claimedHead {
		return stepFrom(state, i, o)
	}
	// gc finishes a claim it judges abandoned, so a claimed branch may be gone by now.
	next := stepFromClaimed(i, o)
	for _, n := range stepFrom(absentHead, i, o) {
		if !contains(next, n) {
			next = append(next, n)
		}
	}
	return next
}

func contains(states []interface{}, s interface{}) bool {
	for _, t := range states {
		if t == s {
			return true
		}
	}
	return false
}

// stepFromClaimed is step for a branch a destroy has claimed and not yet removed.
func stepFromClaimed(i input, o output) []interface{} {
	switch {
	case i.op == "read":
		if o.value == absentHead {
			return []interface{}{claimedHead}
		}
		return nil
	case i.op == "destroy" && o.outcome == "ok":
		return []interface{}{absentHead}
	case i.op == "destroy" && o.outcome == "unknown":
		return []interface{}{claimedHead, absentHead}
	case o.outcome == "ok":
		// Nothing but a destroy succeeds on a claimed branch.
		return nil
	}
	return []interface{}{claimedHead}
}

// stepFrom is step for any other state.
func stepFrom(state int64, i input, o output) []interface{} {
	exists := state != absentHead
	switch i.op {
	case "read":
		if o.value == state || (state == existsUnknown && o.value >= 0) {
			return []interface{}{o.value}
		}
		return nil
	case "cas":
		if i.from == anyBase {
			switch {
			case o.outcome == "ok":
				// An acknowledged commit always says its base.
				return nil
			case o.outcome == "fail" || state == absentHead:
				return []interface{}{state}
			}
			next := existsUnknown
			if state >= 0 {
				next = state + 1
			}
			return []interface{}{state, next}
		}
		applies := state == i.from || (state == existsUnknown && i.from >= 0)
		switch o.outcome {
		case "ok":
			if applies {
				return []interface{}{i.to}
			}
			return nil
		case "fail":
			return []interface{}{state}
		default:
			if applies {
				return []interface{}{state, i.to}
			}
			return []interface{}{state}
		}
	case "create":
		switch o.outcome {
		case "ok":
			if !exists {
				return []interface{}{i.to}
			}
			return nil
		case "fail":
			return []interface{}{state}
		default:
			if !exists {
				return []interface{}{state, i.to}
			}
			return []interface{}{state}
		}
	case "destroy":
		switch o.outcome {
		case "ok":
			if exists {
				return []interface{}{absentHead}
			}
			return nil
		case "fail":
			return []interface{}{state}
		default:
			if exists {
				return []interface{}{state, claimedHead, absentHead}
			}
			return []interface{}{state}
		}
	}
	return nil
}

var model = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{absentHead} },
	Step: step,
	Equal: func(a, b interface{}) bool {
		return a.(int64) == b.(int64)
	},
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		switch i.op {
		case "read":
			return fmt.Sprintf("read -> %d", o.value)
		case "cas":
			return fmt.Sprintf("cas %d->%d %s", i.from, i.to, o.outcome)
		default:
			return fmt.Sprintf("%s %d %s", i.op, i.to, o.outcome)
		}
	},
	DescribeState: func(s interface{}) string {
		switch s.(int64) {
		case absentHead:
			return "absent"
		case claimedHead:
			return "claimed by a destroy"
		case existsUnknown:
			return "some version"
		}
		return fmt.Sprint(s.(int64))
	},
}

type branchResult struct {
	Branch     string `json:"branch"`
	Operations int    `json:"operations"`
	Unknown    int    `json:"unknown"`
	Verdict    string `json:"verdict"`
}

func load(paths []string) (map[string][]porcupine.Operation, map[string]int, error) {
	byBranch := map[string][]porcupine.Operation{}
	unknown := map[string]int{}
	var last int64
	var pending []struct {
		branch string
		index  int
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			if len(sc.Bytes()) == 0 {
				continue
			}
			var r record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("%s:%d: %v", p, line, err)
			}
			if r.Op == "read" && r.Outcome != "ok" {
				// A read that did not answer says nothing about the head.
				continue
			}
			to := existsUnknown
			if r.To != nil {
				to = *r.To
			}
			from := anyBase
			if r.From != nil {
				from = *r.From
			}
			op := porcupine.Operation{
				ClientId: r.Client,
				Input:    input{op: r.Op, from: from, to: to},
				Call:     r.Call,
				Output:   output{outcome: r.Outcome, value: r.Value},
			}
			if r.Call > last {
				last = r.Call
			}
			if r.Ret != nil && r.Outcome != "unknown" {
				op.Return = *r.Ret
				if *r.Ret > last {
					last = *r.Ret
				}
			} else {
				// It may take effect at any moment after its call: it returns after
				// everything else.
				op.Output = output{outcome: "unknown"}
				unknown[r.Branch]++
				pending = append(pending, struct {
					branch string
					index  int
				}{r.Branch, len(byBranch[r.Branch])})
			}
			byBranch[r.Branch] = append(byBranch[r.Branch], op)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range pending {
		byBranch[p.branch][p.index].Return = last + 1
	}
	return byBranch, unknown, nil
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "give up on a branch after this long")
	asJSON := flag.Bool("json", false, "print the verdicts as JSON")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: lincheck [--timeout D] [--json] HISTORY.jsonl ...")
		os.Exit(2)
	}
	byBranch, unknown, err := load(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(2)
	}
	names := make([]string, 0, len(byBranch))
	for b := range byBranch {
		names = append(names, b)
	}
	sort.Strings(names)
	m := model.ToModel()
	status := 0
	results := []branchResult{}
	for _, b := range names {
		res := porcupine.CheckOperationsTimeout(m, byBranch[b], *timeout)
		verdict := map[porcupine.CheckResult]string{
			porcupine.Ok:      "linearizable",
			porcupine.Illegal: "not linearizable",
			porcupine.Unknown: "undecided (timeout)",
		}[res]
		switch res {
		case porcupine.Illegal:
			status = 1
		case porcupine.Unknown:
			if status == 0 {
				status = 2
			}
		}
		results = append(results, branchResult{b, len(byBranch[b]), unknown[b], verdict})
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		_ = enc.Encode(map[string]interface{}{"branches": results, "linearizable": status == 0})
	} else {
		for _, r := range results {
			fmt.Printf("%-28s %6d ops (%d unknown)  %s\n", r.Branch, r.Operations, r.Unknown, r.Verdict)
		}
	}
	os.Exit(status)
}
