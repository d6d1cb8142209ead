"""UDP round trips between two namespace hosts (tests/scripts/test_multihost.sh): checks a link's added delay.
   udp_rtt.py echo PORT             # on one host: answer every datagram
   udp_rtt.py ping ADDR PORT N      # on another: N round trips, prints "min median" in microseconds
The minimum is what the link guarantees (no frame leaves linkem before its due time); the median adds the
machine's scheduling noise."""
import socket
import sys
import time

if sys.argv[1] == "echo":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", int(sys.argv[2])))
    while True:
        d, a = s.recvfrom(64)
        s.sendto(d, a)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    rt = []
    for i in range(int(sys.argv[4])):
        t = time.perf_counter()
        s.sendto(str(i).encode(), (sys.argv[2], int(sys.argv[3])))
        try:
            while s.recvfrom(64)[0] != str(i).encode():
                pass
            rt.append((time.perf_counter() - t) * 1e6)
        except socket.timeout:
            pass
    if not rt:
        sys.exit("no answer")
    rt.sort()
    print(f"{rt[0]:.0f} {rt[len(rt) // 2]:.0f}")
