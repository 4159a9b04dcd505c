"""Run inside the guest by ``bench_vm.py --probe``: the emulated machine's own cost per
exchange, without the testbed's node code. Two Mininet hosts, one 25 ms netem link between
their switches (50 ms round trip); ``ping`` (the kernel alone) and a UDP echo in Python
(kernel + interpreter + sockets), 20 round trips each after one to resolve ARP."""

from __future__ import annotations

import sys
import time

sys.path.insert(0, "/usr/lib/python3/dist-packages")  # Debian's mininet

from mininet.link import TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host
from mininet.nodelib import LinuxBridge

ECHO = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.bind(('10.0.0.2', 9999))\nwhile True:\n    d, a = s.recvfrom(2048)\n"
        "    s.sendto(d, a)\n")
CLIENT = ("import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "s.settimeout(5)\nr = []\nfor i in range(21):\n    t = time.perf_counter()\n"
          "    s.sendto(b'x' * 60, ('10.0.0.2', 9999))\n    s.recvfrom(2048)\n"
          "    r.append((time.perf_counter() - t) * 1000)\nr = sorted(r[1:])\n"
          "print(f'udp echo in Python: min {r[0]:.2f} median {r[10]:.2f} max {r[-1]:.2f} ms')\n")


def main() -> None:
    setLogLevel("error")
    net = Mininet(topo=None, switch=LinuxBridge, controller=None, host=Host, link=TCLink,
                  build=False, waitConnected=False)
    s1, s2 = net.addSwitch("s1"), net.addSwitch("s2")
    h1, h2 = net.addHost("h1", ip="10.0.0.1/24"), net.addHost("h2", ip="10.0.0.2/24")
    net.addLink(h1, s1)
    net.addLink(h2, s2)
    net.addLink(s1, s2, delay="25ms")
    net.build()
    net.start()
    try:
        h1.cmd("ping -c 1 10.0.0.2")  # ARP
        print("ping:", h1.cmd("ping -q -c 20 -i 0.2 10.0.0.2 | tail -1").strip())
        echo = h2.popen([sys.executable, "-c", ECHO])
        time.sleep(2)
        out = h1.cmd(f"{sys.executable} -c \"{CLIENT}\"")  # the shell echoes "> " prompts
        print(out.strip().splitlines()[-1].lstrip("> "))
        echo.kill()
    finally:
        net.stop()


if __name__ == "__main__":
    main()
