"""Drives a reproduced sidecar pod over the network (TestSidecarPod).

argv: HOST PORT TOKEN_FILE. Prints one line per check ("ok NAME" or
"FAIL NAME: why") and exits 1 if any failed.
"""
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from gatebridge_client import Client, GatebridgeError  # noqa: E402

host, port, token_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
token = open(token_file).read().strip()
failed = []


def check(name, cond, why=""):
    print(("ok " if cond else "FAIL ") + name + ("" if cond else ": " + why), flush=True)
    if not cond:
        failed.append(name)


# A wrong token is refused before anything else.
try:
    bad = Client.connect_tcp(host, port, token="wrong-" + token)
    bad.close()
    check("wrong token refused", False, "connected")
except GatebridgeError as e:
    check("wrong token refused", "unauthorized" in str(e).lower() or "token" in str(e).lower(), str(e))
except OSError as e:
    check("wrong token refused", True, str(e))

with Client.connect_tcp(host, port, token=token) as client:

    @client.gate("lookup", summary="Look a word up", usage="lookup WORD")
    def lookup(call):
        return "definition of " + " ".join(call.args) + "\n"

    with client.open_sandbox(backend="auto", workspace="/workspace", writable_workspace=True) as sb:
        r = sb.run("id -u; cat /workspace/hello.txt; read_file hello.txt; lookup pods")
        out = r.stdout.decode()
        check("command runs in the sandbox as its user", r.exit_code == 0 and out.splitlines()[0] == "65532", repr(r))
        check("built-in gate through the mailbox", out.count("hello from the workspace") == 2, out)
        check("runtime gate answered by this client", "definition of pods" in out, out)

        # The protected path: the pod mounts .git read-only in the sandbox
        # (the review appended to .git/config and got exit 0); the rest of
        # the workspace stays writable.
        r = sb.run("printf '[core]\\n\\tfsmonitor = \"touch /tmp/pwned\"\\n' >> /workspace/.git/config; echo rc=$?; "
                   "touch /workspace/.git/hooks-planted; echo rc=$?; echo new > /workspace/new.txt && echo written")
        out = r.stdout.decode()
        check("protected .git read-only in the sandbox", out.count("rc=0") == 0 and out.count("rc=") == 2, out + r.stderr.decode())
        check("the rest of the workspace writable", "written" in out, out + r.stderr.decode())

        r = sb.run("exit 7")
        check("exit status", r.exit_code == 7, repr(r))

        chunks = []
        got_first = threading.Event()

        def on_output(stream, data):
            chunks.append((stream, data))
            got_first.set()

        p = sb.start(["sh", "-c", "echo first; read line; echo got $line; echo err >&2"], on_output=on_output)
        streamed = got_first.wait(10)
        check("output streams before exit", streamed and chunks[0][1].startswith(b"first"), repr(chunks))
        p.write(b"typed\n")
        p.close_stdin()
        res = p.wait()
        joined = b"".join(d for s, d in chunks if s == "stdout")
        check("stdin reaches the command", res.exit_code == 0 and b"got typed" in joined, repr((res, chunks)))

        # From inside the pod: the sidecar's port without the token, and
        # the world outside.
        probe = (
            'printf \'%s\\n\' \'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\' '
            '| nc -w 3 127.0.0.1 7800; echo "rc=$?"'
        )
        r = sb.run(probe)
        out = r.stdout.decode()
        check("sandbox cannot use the sidecar without the token",
              "unauthorized" in out.lower() and '"result"' not in out, out + r.stderr.decode())
        outside = os.environ.get("POD_OUTSIDE", "")
        for target in [t for t in outside.split(",") if t]:
            h, pt = target.rsplit(":", 1)
            r = sb.run("echo x | nc -w 3 %s %s && echo CONNECTED; true" % (h, pt))
            check("sandbox cannot reach " + target, "CONNECTED" not in r.stdout.decode(), r.stdout.decode())

    # A writable sandbox on a workspace whose .git the pod did not mount
    # read-only (a repository cloned below the declared workspace).
    try:
        with client.open_sandbox(backend="auto", workspace="/workspace/sub", writable_workspace=True) as sb2:
            r = sb2.run("echo opened")
        check("writable workspace without a read-only .git refused", False, "opened: " + repr(r))
    except GatebridgeError as e:
        check("writable workspace without a read-only .git refused",
              "protected path .git" in str(e) and "sandbox.attach.read_only_paths" in str(e), str(e))

sys.exit(1 if failed else 0)
