"""The way one host reaches the store: a TCP relay on the host's link (in the root network
namespace) to the store on loopback, which can be made slow.

    proxy.py LISTEN_ADDR LISTEN_PORT UPSTREAM_PORT DELAY_SECS

SIGUSR1 makes it slow: every answer of the store is held DELAY_SECS (past the client's
timeout) before it is passed on, so writes land and their answers come too late. SIGUSR2
makes it fast again. It relays to 127.0.0.1 only.
"""

import asyncio
import signal
import sys

slow = False


async def pipe(reader, writer, delay):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if delay and slow:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass


async def serve(listen_addr, listen_port, upstream_port, delay):
    async def handle(client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, up_w, 0), pipe(up_r, client_w, delay))

    server = await asyncio.start_server(handle, listen_addr, listen_port)
    loop = asyncio.get_running_loop()

    def set_slow(on):
        global slow
        slow = on

    loop.add_signal_handler(signal.SIGUSR1, set_slow, True)
    loop.add_signal_handler(signal.SIGUSR2, set_slow, False)
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
    print("ready", flush=True)
    async with server:
        await stop


if __name__ == "__main__":
    addr, port, upstream, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    asyncio.run(serve(addr, port, upstream, delay))
