#!/usr/bin/python3
# qmp.py SOCKET COMMAND [JSON-ARGUMENTS]: one QMP command on a fresh monitor connection (greeting,
# qmp_capabilities, the command; events are skipped); prints its return value as JSON. Used by
# the benchmarks' QEMU anchor (bench/lib.sh: qemu_start).
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rw")

def recv():
    while True:
        line = f.readline()
        if not line:
            sys.exit("qmp: the monitor closed the connection")
        m = json.loads(line)
        if "event" not in m:
            return m

def call(cmd, args):
    f.write(json.dumps({"execute": cmd, "arguments": args}) + "\n")
    f.flush()
    m = recv()
    if "error" in m:
        sys.exit("qmp: %s: %s" % (cmd, m["error"].get("desc", m["error"])))
    return m["return"]

recv()  # the greeting
call("qmp_capabilities", {})
print(json.dumps(call(sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})))
