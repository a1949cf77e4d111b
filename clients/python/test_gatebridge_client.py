"""Tests of gatebridge_client.py against the real server.

    make build
    GATEBRIDGE_BIN=$PWD/bin/gatebridge python3 -m unittest discover -s clients/python -v

GATEBRIDGE_BIN is the binary (default: bin/gatebridge at the top of the
repository). Every test runs on the local backend; on bwrap too with
GATEBRIDGE_TEST_BWRAP=1, on docker too with GATEBRIDGE_TEST_DOCKER=1 (image
GATEBRIDGE_TEST_IMAGE, default gatebridge-test:latest: `make test-image`).
A backend named in GATEBRIDGE_REQUIRE_BACKENDS (a comma list, as in CI) is
tested too, and then a backend that cannot run fails its tests instead of
skipping them.

No test uses a sleep as its assertion: ordering is shown by handshakes
(the command waits on stdin for the test, the gate waits for the command).
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
import warnings
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from gatebridge_client import (  # noqa: E402
    DEFAULT_MAX_LINE_BYTES,
    NOT_FOUND,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNAUTHORIZED,
    UNAVAILABLE,
    ApprovalAnswer,
    ApprovalRequest,
    Client,
    ConnectionClosedError,
    GateCall,
    GatebridgeError,
    InvalidParamsError,
    Sandbox,
)

BIN = os.environ.get("GATEBRIDGE_BIN") or "bin/gatebridge"
if not os.path.isabs(BIN) and os.sep in BIN:
    BIN = os.path.join(ROOT, BIN)
REQUIRED = [b.strip() for b in os.environ.get("GATEBRIDGE_REQUIRE_BACKENDS", "").split(",") if b.strip()]
IMAGE = os.environ.get("GATEBRIDGE_TEST_IMAGE") or "gatebridge-test:latest"
# Bounds on waits for things that happen at once when all is well: a
# failure, not a slow machine, is what hits them.
WAIT = 20.0


def setUpModule() -> None:
    if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
        raise AssertionError("no gatebridge binary at %s: run `make build`, or set GATEBRIDGE_BIN" % BIN)


_CONFIG_HOME = tempfile.mkdtemp(prefix="gb-pyclient-cfg-")


def server_env() -> Dict[str, str]:
    """The server's environment: no user config file (hermetic tests)."""
    env = dict(os.environ)
    env["GATEBRIDGE_CONFIG"] = ""
    env["XDG_CONFIG_HOME"] = _CONFIG_HOME
    return env


_LOGS: List[Any] = []


def tearDownModule() -> None:
    for f in _LOGS:
        f.close()
    shutil.rmtree(_CONFIG_HOME, ignore_errors=True)


def new_client(**kw: Any) -> Client:
    log = tempfile.TemporaryFile()
    _LOGS.append(log)
    c = Client([BIN, "serve", "--stdio"], stderr=log, env=server_env(), **kw)
    c._test_log = log  # type: ignore[attr-defined]
    return c


def server_log(c: Client) -> str:
    log = getattr(c, "_test_log", None)
    if log is None:
        return ""
    log.seek(0)
    return log.read().decode("utf-8", "replace")


def workspace() -> str:
    """A fresh workspace the sandboxed commands can write: owned by the
    identity gatebridge runs them as when it runs as root (the owner of the
    workspace), else by us."""
    ws = tempfile.mkdtemp(prefix="gb-pyclient-ws-")
    os.chmod(ws, 0o755)
    if os.geteuid() == 0:
        os.chown(ws, 65534, 65534)
    return ws


def backend_wanted(name: str) -> Optional[str]:
    """None when backend name is to be tested, else why not."""
    if name == "local" or name in REQUIRED:
        return None
    var = "GATEBRIDGE_TEST_" + name.upper()
    if os.environ.get(var) == "1":
        return None
    return "%s tests are off: set %s=1 (or name it in GATEBRIDGE_REQUIRE_BACKENDS)" % (name, var)


def backend_missing(name: str, why: str) -> None:
    """A wanted backend cannot run: fail when it is required, else skip."""
    if name in REQUIRED:
        raise AssertionError("backend %s is required (GATEBRIDGE_REQUIRE_BACKENDS) but cannot run: %s" % (name, why))
    raise unittest.SkipTest("backend %s cannot run here: %s" % (name, why))


def proc_cmdlines_with(marker: str) -> List[int]:
    """Host pids whose command line holds marker."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(d))
        except OSError:
            pass
    return out


def pid_alive(pid: int, needle: bytes) -> bool:
    """Whether pid runs (not a zombie) with needle in its command line."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
        with open("/proc/%d/stat" % pid, "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return needle in cmdline and state != b"Z"


class Recorder:
    """Records on_output chunks and lets a test wait until some text arrived."""

    def __init__(self) -> None:
        self.chunks: List[Tuple[str, bytes]] = []
        self.cond = threading.Condition()

    def __call__(self, stream: str, data: bytes) -> None:
        with self.cond:
            self.chunks.append((stream, data))
            self.cond.notify_all()

    def text(self, stream: str = "stdout") -> bytes:
        with self.cond:
            return b"".join(d for s, d in self.chunks if s == stream)

    def wait_for(self, needle: bytes, stream: str = "stdout", timeout: float = WAIT) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: needle in b"".join(d for s, d in self.chunks if s == stream), timeout)


class BackendTests:
    """The client against one backend. One server and one sandbox per
    class (opening a docker sandbox takes a while); every test registers
    gates under its own names."""

    BACKEND = "local"
    client: Client
    sb: Sandbox
    ws: str

    # unittest.TestCase methods, for the type checker.
    assertEqual: Any
    assertTrue: Any
    assertFalse: Any
    assertIn: Any
    assertIsNone: Any
    assertRaises: Any
    assertLess: Any
    assertGreater: Any
    assertGreaterEqual: Any
    assertNotEqual: Any
    fail: Any
    addCleanup: Any
    id: Any

    @classmethod
    def connect(cls) -> Client:
        """The class's connection."""
        return new_client()

    @classmethod
    def open_extra(cls) -> Dict[str, Any]:
        return {"image": IMAGE} if cls.BACKEND == "docker" else {}

    @classmethod
    def setUpClass(cls) -> None:
        why = backend_wanted(cls.BACKEND)
        if why:
            raise unittest.SkipTest(why)
        cls.client = cls.connect()
        cls.ws = workspace()
        try:
            cls.sb = cls.client.open_sandbox(backend=cls.BACKEND, workspace=cls.ws, **cls.open_extra())
            # A backend can pass sandbox/open and still fail to run anything.
            r = cls.sb.run(["true"])
            if r.exit_code != 0:
                raise GatebridgeError(UNAVAILABLE, "`true` exited %d: %s" % (r.exit_code, r.stderr_text.strip()))
        except GatebridgeError as e:
            cls.client.close()
            shutil.rmtree(cls.ws, ignore_errors=True)
            backend_missing(cls.BACKEND, str(e))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        shutil.rmtree(cls.ws, ignore_errors=True)

    def gate_name(self, base: str) -> str:
        """A gate name of this test's own (gates live as long as the
        connection)."""
        name = "%s_%s" % (base, uuid.uuid4().hex[:8])
        self.addCleanup(self._unregister, name)
        return name

    def _unregister(self, name: str) -> None:
        if not self.client.closed:
            try:
                self.client.unregister_gate(name)
            except GatebridgeError:
                pass

    # ------------------------------------------------------------ commands

    def test_run_bytes_exact(self) -> None:
        data = bytes(range(256)) * 64 + b"\x00tail without newline"
        r = self.sb.run(["sh", "-c", "cat; printf 'e\\001\\377\\000x' >&2; exit 7"], stdin=data)
        self.assertEqual(r.exit_code, 7)
        self.assertEqual(r.stdout, data)
        self.assertEqual(r.stderr, b"e\x01\xff\x00x")
        self.assertIsNone(r.signal)
        self.assertFalse(r.timed_out)
        code, out, err = r  # unpacks like a tuple
        self.assertEqual((code, out, err), (7, data, b"e\x01\xff\x00x"))

    def test_run_string_is_sh_and_argv_is_exact(self) -> None:
        r = self.sb.run("printf '%s|' \"${0##*/}\" a 'b c'")
        self.assertEqual(r.stdout, b"sh|a|b c|")
        r = self.sb.run(["printf", "%s|", "a b", "", "$HOME", "*"])
        self.assertEqual(r.stdout, b"a b||$HOME|*|")
        self.assertEqual(self.sb.run("exit 3").exit_code, 3)
        r = self.sb.run("echo $FOO", env={"FOO": "bar baz"})
        self.assertEqual(r.stdout, b"bar baz\n")

    def test_cwd(self) -> None:
        r = self.sb.run("pwd")
        self.assertEqual(r.stdout.decode().strip(), self.sb.workspace_inside)
        with self.assertRaises(GatebridgeError) as cm:
            self.sb.run("pwd", cwd="../..")
        self.assertEqual(cm.exception.code, INVALID_PARAMS)
        self.assertIn("cwd", cm.exception.message)
        # run() waits for the exit alone; the refused start ended that wait
        # and left no process behind.
        with self.client._lock:
            self.assertEqual(self.client._processes, {})

    def test_stdin_interactive(self) -> None:
        rec = Recorder()
        p = self.sb.start(["sh", "-c", "while read -r l; do echo \"got:$l\"; done; echo eof"], on_output=rec)
        p.write(b"one\n")
        # The command answers line by line while stdin stays open.
        self.assertTrue(rec.wait_for(b"got:one\n"), rec.chunks)
        self.assertTrue(p.running)
        p.write("two\n")
        self.assertTrue(rec.wait_for(b"got:two\n"), rec.chunks)
        p.close_stdin()
        r = p.wait(timeout=WAIT)
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, b"got:one\ngot:two\neof\n")
        self.assertEqual(rec.text(), r.stdout)

    def test_tty(self) -> None:
        r = self.sb.run("test -t 0 && echo tty || echo notty")
        self.assertEqual(r.stdout, b"notty\n")
        rec = Recorder()
        script = ("tty -s && echo tty; stty size; echo to-stderr >&2; "
                  "trap 'echo \"winch $(stty size)\"; W=1' WINCH; stty -echo; echo ready; "
                  "while [ -z \"$W\" ]; do sleep 0.05; done; read line; echo \"got $line\"; exit 7")
        try:
            p = self.sb.start(["sh", "-c", script], tty=(20, 70), on_output=rec)
        except InvalidParamsError as e:
            if self.BACKEND != "docker":
                raise
            self.assertIn("docker", e.message)
            self.skipTest("this docker sandbox cannot open a terminal: %s" % e)
        self.assertTrue(rec.wait_for(b"ready"), rec.chunks)
        self.assertTrue(p.resize(40, 100))
        self.assertTrue(rec.wait_for(b"winch"), rec.chunks)
        p.write(b"hello\n")
        r = p.wait(timeout=WAIT)
        self.assertEqual(r.exit_code, 7)
        self.assertEqual(r.stdout.replace(b"\r\n", b"\n"), b"tty\n20 70\nto-stderr\nready\nwinch 40 100\ngot hello\n")
        self.assertEqual(r.stderr, b"")
        self.assertFalse(p.resize(10, 10))  # exited
        with self.assertRaises(InvalidParamsError):
            self.sb.start("true", stdin=False).resize(10, 10)

    def test_tty_timeout(self) -> None:
        try:
            r = self.sb.run("echo started; sleep 600", tty=(24, 80), timeout=0.5)
        except InvalidParamsError as e:
            if self.BACKEND != "docker":
                raise
            self.skipTest("this docker sandbox cannot open a terminal: %s" % e)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.exit_code, 124)

    def test_arg0(self) -> None:
        # busybox (the docker test image) picks its applet by argv[0]: a
        # login shell's -sh works everywhere.
        cmd = ["sh", "-c", "tr '\\0' ' ' < /proc/$$/cmdline; echo"]
        try:
            r = self.sb.run(cmd, arg0="-sh")
        except InvalidParamsError as e:
            if self.BACKEND not in ("bwrap", "docker"):
                raise
            self.assertIn('"%s"' % self.BACKEND, e.message)
            self.skipTest("refused, naming the backend: %s" % e)
        self.assertTrue(r.stdout.startswith(b"-sh -c "), r.stdout)

    def test_waiting_thread_reads_for_others(self) -> None:
        # A thread waiting for a process's exit reads the server's lines
        # itself (no other thread does then); the answers it reads for
        # other threads must reach them at once, not when its process
        # exits. Here it cannot exit before they are all in: the command
        # waits for a line only this test writes afterwards.
        p = self.sb.start(["sh", "-c", "read -r l; echo \"got:$l\""], stdin=True)
        waited: List[Any] = []
        waiter = threading.Thread(target=lambda: waited.append(p.wait()), daemon=True)
        waiter.start()
        answered: List[int] = []

        def ask() -> None:
            for _ in range(20):
                self.client.list_gates()
                answered.append(1)

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        asker.join(WAIT)
        self.assertEqual(len(answered), 20, "answers read by the waiting thread did not reach their callers")
        self.assertTrue(p.running)
        p.write(b"x\n")
        p.close_stdin()
        waiter.join(WAIT)
        self.assertEqual(len(waited), 1, "the waiting thread never saw its exit")
        self.assertEqual((waited[0].exit_code, waited[0].stdout), (0, b"got:x\n"))
        # And the reader thread reads again: output of a process with a
        # callback comes to it (on the events thread) with no one waiting.
        rec = Recorder()
        q = self.sb.start(["sh", "-c", "echo up; cat >/dev/null"], stdin=True, on_output=rec)
        self.assertTrue(rec.wait_for(b"up\n"), rec.chunks)
        q.close_stdin()
        self.assertEqual(q.wait(timeout=WAIT).exit_code, 0)

    def test_streaming_order(self) -> None:
        rec = Recorder()
        p = self.sb.start(["sh", "-c", "echo first; echo e1 >&2; read x; echo second; echo e2 >&2; exit 4"],
                          on_output=rec)
        # The first lines arrive while the command still runs: it waits
        # for our line before it can print the rest and exit.
        self.assertTrue(rec.wait_for(b"first\n"), rec.chunks)
        self.assertTrue(rec.wait_for(b"e1\n", "stderr"), rec.chunks)
        self.assertTrue(p.running)
        self.assertIsNone(p.exit_code)
        self.assertEqual(rec.text(), b"first\n")
        p.write(b"go\n")
        r = p.wait(timeout=WAIT)
        self.assertEqual(r.exit_code, 4)
        self.assertEqual(rec.text(), b"first\nsecond\n")
        self.assertEqual(rec.text("stderr"), b"e1\ne2\n")
        # Every callback ran before wait() returned, in the server's order.
        self.assertEqual(b"".join(d for _, d in rec.chunks), b"".join(c.data for c in p.read(0).chunks))

    def test_signal_term(self) -> None:
        rec = Recorder()
        p = self.sb.start(["sh", "-c", "echo ready; sleep 30; echo not-reached"], stdin=False, on_output=rec)
        self.assertTrue(rec.wait_for(b"ready\n"))
        t0 = time.monotonic()
        self.assertTrue(p.signal("TERM"))
        r = p.wait(timeout=WAIT)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertTrue(r.exit_code == 143 or r.signal == "TERM", r)
        self.assertNotEqual(r.exit_code, 0)
        self.assertFalse(r.timed_out)
        self.assertEqual(r.stdout, b"ready\n")
        self.assertFalse(p.signal("KILL"))  # already exited

    def test_timeout(self) -> None:
        t0 = time.monotonic()
        r = self.sb.run("echo start; sleep 30; echo not-reached", timeout=0.3)  # seconds
        elapsed = time.monotonic() - t0
        self.assertTrue(r.timed_out, r)
        self.assertNotEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, b"start\n")
        self.assertGreaterEqual(elapsed, 0.25)
        self.assertLess(elapsed, 15)

    def test_read_snapshot_list(self) -> None:
        p = self.sb.start(["sh", "-c", "printf a; printf b >&2; read x; printf c"])
        rec_first = p.read(0, wait=WAIT)
        self.assertTrue(rec_first.chunks)
        self.assertFalse(rec_first.exited)
        listed = {x["processId"]: x for x in self.client.list_processes()}
        self.assertTrue(listed[p.id]["running"])
        self.assertEqual(listed[p.id]["sandboxId"], self.sb.id)
        p.write(b"\n")
        p.wait(timeout=WAIT)
        rr = p.read(0)
        self.assertTrue(rr.exited)
        self.assertEqual(rr.exit_code, 0)
        self.assertEqual([c.seq for c in rr.chunks], list(range(1, len(rr.chunks) + 1)))
        self.assertEqual(rr.next_seq, len(rr.chunks) + 1)
        self.assertEqual(b"".join(c.data for c in rr.chunks if c.stream == "stdout"), b"ac")
        self.assertEqual(p.read(rr.chunks[-1].seq).chunks, [])
        snap = p.snapshot()
        self.assertEqual((snap.stdout, snap.stderr, snap.exit_code, snap.running, snap.truncated), (b"ac", b"b", 0, False, False))
        st = p.status()
        self.assertEqual((st.get("exitCode"), st.get("running")), (0, False))

    def test_answer(self) -> None:
        # process/exited's answer (and answerBase64): what submit got, exact.
        r = self.sb.run(["sh", "-c", 'submit "$(printf "a\\377 b")"; echo done'])
        self.assertEqual((r.exit_code, r.stdout), (0, b"done\n"))
        self.assertEqual(r.answer, "a\udcff b")
        self.assertEqual(r.answer_bytes, b"a\xff b")
        r = self.sb.run("submit first; submit 'the last'")
        self.assertEqual(r.answer, "the last")
        self.assertIsNone(self.sb.run("true").answer)
        self.assertIsNone(self.sb.run("true").answer_bytes)
        p = self.sb.start("submit 42", stdin=False)
        self.assertEqual(p.wait(timeout=WAIT).answer, "42")

    def test_gate_calls_reported(self) -> None:
        # process/exited's gateCalls (issue 31): each gate call the command
        # made, in order, its arguments exact; with on_gate_call, each
        # also as it is answered, before the exit.
        name = self.gate_name("reported")
        ids: List[str] = []

        def reported(call: GateCall) -> Any:
            ids.append(call.call_id)
            return (3, "", "no\n") if call.args[:1] == ["fail"] else "ok\n"

        self.client.register_gate(name, reported)
        seen: List[Any] = []
        r = self.sb.run("%(g)s \"$(printf 'caf\\351')\" x; %(g)s fail 2>/dev/null; echo rc=$?" % {"g": name},
                        on_gate_call=seen.append)
        self.assertEqual(r.stdout, b"ok\nrc=3\n", r)
        self.assertEqual([(c.gate, c.exit_code, c.decision) for c in r.gate_calls],
                         [(name, 0, "ran"), (name, 3, "ran")])
        self.assertEqual(r.gate_calls[0].args, ["caf\udce9", "x"])
        self.assertEqual(r.gate_calls[0].args_bytes, [b"caf\xe9", b"x"])
        self.assertEqual(r.gate_calls_dropped, 0)
        self.assertGreaterEqual(r.gate_calls[1].duration, 0.0)
        self.assertLess(r.gate_calls[1].duration, 60.0)  # seconds, not milliseconds
        self.assertEqual([(c.call_id, c.args) for c in seen], [(c.call_id, c.args) for c in r.gate_calls])
        self.assertEqual([c.call_id for c in r.gate_calls], ids)  # the gate/call's callId
        # None made: an empty list; a started process has them after wait.
        self.assertEqual(self.sb.run("true").gate_calls, [])
        p = self.sb.start("%s a" % name, stdin=False)
        p.wait(timeout=WAIT)
        self.assertEqual([c.args for c in p.gate_calls], [["a"]])

    def test_deprecated_ms_still_work(self) -> None:
        # The old millisecond names work for one release, with a warning.
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = self.sb.run("echo start; sleep 30", timeout_ms=300)
            self.assertTrue(r.timed_out, r)
            r = self.sb.run("sleep 30", None, 300)  # the old positional order: timeout_ms, cwd, env
            self.assertTrue(r.timed_out, r)
            p = self.sb.start("sleep 30", stdin=False, timeout_ms=300)
            self.assertTrue(p.wait(timeout=WAIT).timed_out)
        dep = [x for x in w if issubclass(x.category, DeprecationWarning)]
        self.assertGreaterEqual(len(dep), 3, [str(x.message) for x in w])
        self.assertTrue(all(x.filename == __file__ for x in dep), [(x.filename, x.lineno) for x in dep])
        self.assertIn("timeout=", str(dep[0].message))

    def test_errors_raise(self) -> None:
        with self.assertRaises(GatebridgeError) as cm:
            self.client.request("no/such/method")
        self.assertEqual(cm.exception.code, METHOD_NOT_FOUND)
        with self.assertRaises(GatebridgeError) as cm:
            self.client.request("process/wait", {"processId": "nope"})
        self.assertEqual(cm.exception.code, NOT_FOUND)
        p = self.sb.start(["true"], stdin=False)
        with self.assertRaises(GatebridgeError):
            p.write(b"x")
        p.wait(timeout=WAIT)

    # ------------------------------------------------------------ gates

    def test_gate_stdin_default_if_no_args(self) -> None:
        # Registered without stdin=: what is piped into the gate reaches it.
        name = self.gate_name("piped")
        got: List[Optional[bytes]] = []

        @self.client.gate(name, summary="records stdin")
        def piped(call: GateCall) -> Any:
            got.append(call.stdin)
            return ""

        r = self.sb.run("echo hello | %s" % name)
        self.assertEqual(r.exit_code, 0, r)
        self.assertEqual(got, [b"hello\n"])

    def test_gate_args_stdin_exit_stderr(self) -> None:
        name = self.gate_name("mygate")
        calls: List[GateCall] = []

        @self.client.gate(name, summary="echo for tests", usage=name + " [ARG...]", stdin="if-no-args")
        def mygate(call: GateCall) -> Any:
            calls.append(call)
            if not call.args:
                return (5, b"in=" + (call.stdin or b"<none>"), "warn: no args\n")
            if call.args[0] == "code":
                return int(call.args[1])
            if call.args[0] == "bytes":
                return bytes(range(256))
            return "args=%s\n" % "|".join(call.args)

        r = self.sb.run(
            "%(g)s a 'b c' ''; echo rc=$?; printf 'x\\000y\\377' | %(g)s; rc=$?; echo; echo rc=$rc; "
            "%(g)s code 42; echo rc=$?" % {"g": name})
        self.assertEqual(r.stdout, b"args=a|b c|\nrc=0\nin=x\x00y\xff\nrc=5\nrc=42\n", r)
        self.assertEqual(r.stderr, b"warn: no args\n")
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(len(calls), 3)
        self.assertEqual(calls[0].args, ["a", "b c", ""])
        self.assertIsNone(calls[0].stdin)  # if-no-args: not sent with args
        self.assertEqual(calls[1].stdin, b"x\x00y\xff")
        self.assertEqual(calls[0].sandbox_id, self.sb.id)
        self.assertTrue(calls[0].process_id)
        self.assertEqual(calls[0].cwd, self.sb.workspace_inside)
        self.assertIs(calls[0].sandbox, self.sb)
        # Binary output, byte for byte, through a pipe.
        r = self.sb.run("%s bytes | od -An -tx1 | tr -d ' \\n'" % name)
        self.assertEqual(r.stdout.decode(), bytes(range(256)).hex())
        gates = {g["name"]: g for g in self.client.list_gates()}
        self.assertEqual(gates[name]["kind"], "runtime")
        self.assertEqual(gates[name]["summary"], "echo for tests")
        self.assertEqual(gates[name]["stdin"], "if-no-args")

    def test_gate_streams_before_returning(self) -> None:
        name = self.gate_name("streamgate")
        saw_first = threading.Event()
        result: Dict[str, Any] = {}

        @self.client.gate(name)
        def streamgate(call: GateCall) -> Any:
            result["sent"] = call.write_stdout("part1\n")
            # The caller prints what it read only if part1 reached it while
            # this gate still runs.
            result["streamed"] = saw_first.wait(WAIT)
            call.write_stderr(b"progress\n")
            return "part2\n"

        def on_output(stream: str, data: bytes) -> None:
            if b"saw:part1" in data:
                saw_first.set()

        r = self.sb.run("%s | { read -r first; echo \"saw:$first\"; cat; }; echo rc=$?" % name, on_output=on_output)
        self.assertTrue(result.get("sent"))
        self.assertTrue(result.get("streamed"), "the gate's first write did not reach the caller before it returned")
        self.assertEqual(r.stdout, b"saw:part1\npart2\nrc=0\n")
        self.assertEqual(r.stderr, b"progress\n")

    def test_gate_raises(self) -> None:
        name = self.gate_name("badgate")

        def badgate(call: GateCall) -> Any:
            raise ValueError("boom 42: %s" % call.args)

        self.client.register_gate(name, badgate)
        r = self.sb.run("%s x; echo rc=$?" % name)
        self.assertEqual(r.stdout, b"rc=1\n")
        self.assertIn(b"boom 42: ['x']", r.stderr)
        self.assertIn(name.encode(), r.stderr)

    def test_gate_unregister(self) -> None:
        name = "gone_%s" % uuid.uuid4().hex[:8]
        self.client.register_gate(name, lambda call: "here\n")
        self.assertEqual(self.sb.run(name).stdout, b"here\n")
        with self.assertRaises(GatebridgeError):
            self.client.register_gate(name, lambda call: "twice\n")
        self.client.unregister_gate(name)
        r = self.sb.run("%s; echo rc=$?" % name)
        self.assertEqual(r.stdout, b"rc=127\n", r)
        self.assertNotIn(name, [g["name"] for g in self.client.list_gates()])

    def test_gate_bad_return_is_an_error(self) -> None:
        name = self.gate_name("oddgate")
        self.client.register_gate(name, lambda call: 300)
        r = self.sb.run("%s; echo rc=$?" % name)
        self.assertEqual(r.stdout, b"rc=1\n")
        self.assertIn(b"0-255", r.stderr)

    def test_args_not_utf8(self) -> None:
        """Arguments that are not UTF-8 reach the gate and the approval
        callback exactly (the server sends their bytes in argsBase64,
        docs/json.md): \\xff and \\xfe stay apart, as str decoded with
        surrogateescape (as Python decodes sys.argv) and as bytes; an
        argument typed as the four characters \\xff stays those four."""
        name = self.gate_name("bytesgate")
        calls: List[GateCall] = []
        asked: List[ApprovalRequest] = []
        self.client.on_approval = lambda req: (asked.append(req), "allow")[1]
        self.addCleanup(setattr, self.client, "on_approval", None)
        # The gate echoes its arguments as a str: they go back exact.
        self.client.register_gate(name, lambda call: (calls.append(call), "|".join(call.args) + "\n")[1], approval=True)
        r = self.sb.run(
            "d=\"$TMPDIR/$(printf 'c\\376')\"; mkdir -p \"$d\" && cd \"$d\" && "
            "%(g)s \"$(printf 'a\\377')\" ok && %(g)s \"$(printf 'a\\376')\" '\\xff'; echo rc=$?" % {"g": name})
        self.assertEqual(r.stdout, b"a\xff|ok\na\xfe|\\xff\nrc=0\n", r)
        self.assertEqual([c.args_bytes for c in calls], [[b"a\xff", b"ok"], [b"a\xfe", b"\\xff"]])
        self.assertEqual([c.args for c in calls], [["a\udcff", "ok"], ["a\udcfe", "\\xff"]])
        self.assertEqual([a.encode("utf-8", "surrogateescape") for a in calls[1].args], [b"a\xfe", b"\\xff"])
        self.assertNotEqual(calls[0].args, calls[1].args)
        self.assertTrue(calls[0].cwd_bytes.endswith(b"/c\xfe"), calls[0].cwd_bytes)
        self.assertTrue(calls[0].cwd.endswith("/c\udcfe"), calls[0].cwd)
        self.assertEqual([a.args_bytes for a in asked], [[b"a\xff", b"ok"], [b"a\xfe", b"\\xff"]])
        self.assertEqual(asked[0].args, ["a\udcff", "ok"])

    def test_approval_allow_deny(self) -> None:
        name = self.gate_name("riskygate")
        once = self.gate_name("sessiongate")
        asked: List[ApprovalRequest] = []
        ran: List[List[str]] = []

        def on_approval(req: ApprovalRequest) -> Any:
            asked.append(req)
            if req.gate == once:
                return "allowForSession"
            if req.args and req.args[0] == "no":
                return ("deny", "not today")
            return "allow"

        self.client.on_approval = on_approval
        self.addCleanup(setattr, self.client, "on_approval", None)
        self.client.register_gate(name, lambda call: (ran.append(call.args), "ran:%s\n" % call.args[0])[1], approval=True)
        self.client.register_gate(once, lambda call: "once\n", approval=True)
        r = self.sb.run("%(g)s yes; echo rc=$?; %(g)s no; echo rc=$?; %(o)s; %(o)s; echo rc=$?" % {"g": name, "o": once})
        self.assertEqual(r.stdout, b"ran:yes\nrc=0\nrc=126\nonce\nonce\nrc=0\n", r)
        self.assertIn(b"not today", r.stderr)
        self.assertEqual(ran, [["yes"]])  # a denied gate does not run
        self.assertEqual([(a.gate, a.args) for a in asked], [(name, ["yes"]), (name, ["no"]), (once, [])])
        self.assertEqual(asked[0].sandbox_id, self.sb.id)
        self.assertTrue(asked[0].process_id)

    def test_approval_grants(self) -> None:
        """The callback sees the offered grants and may return one: an
        always grant is kept in the server's grants file and used next
        time without asking; a connection-only one is used within the
        sandbox but not written to the file."""
        name = self.gate_name("grantgate")
        asked: List[ApprovalRequest] = []

        def on_approval(req: ApprovalRequest) -> Any:
            asked.append(req)
            if req.args == ["keep"]:
                return req.offer("always", "exact")
            if req.args == ["conn"]:
                return ApprovalAnswer("allow", grant=req.offer("always", "exact"), connection_only=True)
            return ("deny", "not that")

        self.client.on_approval = on_approval
        self.addCleanup(setattr, self.client, "on_approval", None)
        self.client.register_gate(name, lambda call: "ran:%s\n" % call.args[0], approval=True)
        r = self.sb.run("%(g)s keep; %(g)s keep; %(g)s conn; %(g)s conn; %(g)s other; echo rc=$?" % {"g": name})
        self.assertEqual(r.stdout, b"ran:keep\nran:keep\nran:conn\nran:conn\nrc=126\n", r)
        self.assertEqual([a.args for a in asked], [["keep"], ["conn"], ["other"]])
        first = asked[0].offers[0]
        self.assertEqual((first.scope, first.lifetime), ("any", "session"))
        self.assertIn(name, first.description)
        self.assertEqual(asked[0].offer("always", "exact").exact, ["keep"])
        with open(os.path.join(_CONFIG_HOME, "gatebridge", "grants.yaml")) as f:
            stored = f.read()
        self.assertIn(name, stored)
        self.assertIn("keep", stored)
        self.assertNotIn("conn", stored)

    def test_approval_without_callback_denies(self) -> None:
        name = self.gate_name("guarded")
        self.client.register_gate(name, lambda call: "ran\n", approval=True)
        r = self.sb.run("%s; echo rc=$?" % name)
        self.assertEqual(r.stdout, b"rc=126\n")
        self.assertIn(b"no approval callback", r.stderr)

    def test_gate_never_answers(self) -> None:
        name = self.gate_name("slowgate")
        done = threading.Event()
        seen: Dict[str, Any] = {}

        def slowgate(call: GateCall) -> Any:
            seen["deadline_left"] = call.time_left()
            seen["cancelled"] = call.cancelled.wait(WAIT)
            seen["late_write"] = call.write_stdout("too late\n")
            done.set()
            return "never seen\n"

        self.client.register_gate(name, slowgate, timeout_ms=500)
        t0 = time.monotonic()
        r = self.sb.run("%s; echo rc=$?" % name)
        elapsed = time.monotonic() - t0
        self.assertTrue(done.wait(WAIT))
        self.assertTrue(seen["cancelled"], "the call object never saw cancelled")
        self.assertFalse(seen["late_write"])
        self.assertLess(seen["deadline_left"], 1.0)
        self.assertEqual(r.stdout, b"rc=1\n", r)
        self.assertIn(b"did not answer", r.stderr)
        self.assertGreaterEqual(elapsed, 0.45)
        self.assertLess(elapsed, 15)

    def test_caller_killed_cancels_gate(self) -> None:
        name = self.gate_name("waitgate")
        started = threading.Event()
        cancelled = threading.Event()

        def waitgate(call: GateCall) -> Any:
            started.set()
            if call.cancelled.wait(WAIT):
                cancelled.set()
            return ""

        self.client.register_gate(name, waitgate)
        p = self.sb.start(["sh", "-c", name], stdin=False)
        self.assertTrue(started.wait(WAIT))
        p.signal("KILL")
        p.wait(timeout=WAIT)
        self.assertTrue(cancelled.wait(WAIT), "the gate was not cancelled when its caller died")

    def test_many_concurrent_gate_calls(self) -> None:
        name = self.gate_name("pargate")
        barrier = threading.Barrier(4, timeout=WAIT)

        def pargate(call: GateCall) -> Any:
            barrier.wait()  # four calls run at once, or this breaks
            return call.args[0] + "\n"

        self.client.register_gate(name, pargate)
        r = self.sb.run("for i in 1 2 3 4; do %s $i > /dev/null & done; wait; echo ok" % name)
        self.assertEqual(r.stdout, b"ok\n")
        self.assertFalse(barrier.broken)

    # ------------------------------------------------------------ sandboxes

    def test_files_persist_in_writable_workspace(self) -> None:
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        with self.client.open_sandbox(backend=self.BACKEND, workspace=ws, writable_workspace=True,
                                      **self.open_extra()) as sb:
            r1 = sb.run("mkdir -p sub && printf 'hello\\000' > sub/f.bin && echo wrote")
            self.assertEqual(r1.stdout, b"wrote\n", r1)
            r2 = sb.run(["cat", "f.bin"], cwd="sub")
            self.assertEqual(r2.stdout, b"hello\x00", r2)
        with open(os.path.join(ws, "sub", "f.bin"), "rb") as f:
            self.assertEqual(f.read(), b"hello\x00")
        self.assertNotIn(sb.id, self.client._sandboxes)

    def test_file_api(self) -> None:
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        os.mkdir(os.path.join(ws, ".git"))
        with open(os.path.join(ws, ".git", "config"), "w") as f:
            f.write("[core]\n")
        with self.client.open_sandbox(backend=self.BACKEND, workspace=ws, writable_workspace=True,
                                      **self.open_extra()) as sb:
            name = os.fsdecode(b"d/caf\xff.bin")  # not UTF-8: a lone surrogate
            sb.fs.write(name, b"\x00hello")
            sb.fs.append(name, b" world")
            self.assertEqual(sb.read_file(name), b"\x00hello world")
            r = sb.run("cat d/caf*")  # (argv has no base64 sibling: the shell names it)
            self.assertEqual(r.stdout, b"\x00hello world", r)
            ents = sb.fs.list("d")
            self.assertEqual([(e.name, e.type, e.size) for e in ents], [(os.fsdecode(b"caf\xff.bin"), "file", 12)])
            self.assertGreater(ents[0].mtime, 1e9)  # seconds, not milliseconds
            self.assertLess(ents[0].mtime, 1e11)
            # Over one chunk: a temporary file renamed over the name.
            big = os.urandom(int(self.client.limits["maxFsChunkBytes"]) + 10)
            sb.write_file(sb.workspace_inside + "/big.bin", big)
            self.assertEqual(sb.fs.read("big.bin"), big)
            self.assertEqual(sorted(e.name for e in sb.fs.list()), [".git", "big.bin", "d"])
            sb.fs.mkdir("e/f", recursive=True)
            sb.fs.rename("big.bin", "e/f/big.bin")
            self.assertTrue(sb.fs.stat("e/f").is_dir)
            sb.fs.remove("e", recursive=True)
            self.assertFalse(sb.fs.exists("e"))
            os.symlink("/etc", os.path.join(ws, "x"))
            for bad, why in [("x/passwd", "symbolic link"), ("../etc/passwd", "leaves the workspace"),
                             ("/etc/passwd", "outside the workspace"), (".git/config", "protected")]:
                with self.assertRaises(GatebridgeError) as cm:
                    sb.fs.read(bad)
                self.assertEqual(cm.exception.code, -32602)
                self.assertIn(why, cm.exception.message)
            with self.assertRaises(GatebridgeError) as cm:
                sb.fs.write(".git/config", b"evil")
            self.assertIn("protected", cm.exception.message)
        with open(os.path.join(ws, ".git", "config")) as f:
            self.assertEqual(f.read(), "[core]\n")
        with self.client.open_sandbox(backend=self.BACKEND, workspace=ws, **self.open_extra()) as ro:
            with self.assertRaises(GatebridgeError) as cm:
                ro.fs.write("new.txt", b"x")
            self.assertIn("read-only", cm.exception.message)

    def test_sandbox_close_stops_processes(self) -> None:
        sb = self.client.open_sandbox(backend=self.BACKEND, workspace=self.ws, **self.open_extra())
        rec = Recorder()
        p = sb.start(["sh", "-c", "echo up; sleep 30"], stdin=False, on_output=rec)
        self.assertTrue(rec.wait_for(b"up\n"))
        sb.close()
        r = p.wait(timeout=WAIT)
        self.assertNotEqual(r.exit_code, 0)
        with self.assertRaises(GatebridgeError):
            sb.start(["true"], stdin=False)


    # ------------------------------------------------------------ shutdown

    def test_close_leaves_nothing(self) -> None:
        c = new_client()
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        marker = "gbpy-marker-" + uuid.uuid4().hex
        sb = c.open_sandbox(backend=self.BACKEND, workspace=ws, **self.open_extra())
        rec = Recorder()
        p = sb.start(["sh", "-c", "echo up; sleep 30; :", marker], stdin=False, on_output=rec)
        self.assertTrue(rec.wait_for(b"up\n"))
        # Docker's processes are visible here only when the engine runs on
        # this host; the container itself is checked below.
        visible = bool(proc_cmdlines_with(marker))
        if self.BACKEND != "docker":
            self.assertTrue(visible, "the test's own sandboxed process is not visible in /proc")
        server = c._proc
        assert server is not None
        c.close()
        self.assertIsNotNone(server.returncode, "the server still runs after close()")
        self.assertEqual(server.returncode, 0, server_log(c))
        self.assertFalse(pid_alive(server.pid, b"serve"), "the server process remains")
        if visible:
            self.assertEqual(proc_cmdlines_with(marker), [], "a sandboxed process outlived close()")
        if self.BACKEND == "docker" and shutil.which("docker"):
            out = subprocess.run(["docker", "ps", "-aq", "--filter", "name=rpc-%d-" % server.pid],
                                 stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
            self.assertEqual(out.strip(), "", "the sandbox's container outlived close()")
        self.assertTrue(c.closed)
        try:  # the process ended with the connection, or is reported lost
            p.wait(timeout=WAIT)
        except ConnectionClosedError:
            pass
        with self.assertRaises(ConnectionClosedError):
            c.list_gates()
        c.close()  # twice is fine


class LocalTests(BackendTests, unittest.TestCase):
    BACKEND = "local"


class BwrapTests(BackendTests, unittest.TestCase):
    BACKEND = "bwrap"


class DockerTests(BackendTests, unittest.TestCase):
    BACKEND = "docker"


class LocalOverTLSTests(BackendTests, unittest.TestCase):
    """LocalTests over ``serve --listen`` with TLS (Client.connect_tcp):
    the same calls, with the client's reader thread and its writing
    threads on one TLS connection."""

    BACKEND = "local"
    listen_dir: str
    listen: "ListenServer"

    @classmethod
    def setUpClass(cls) -> None:
        if not shutil.which("openssl"):
            raise unittest.SkipTest("no openssl to make a certificate")
        cls.listen_dir = tempfile.mkdtemp(prefix="gb-pyclient-tls-")
        token, token_file = make_token(cls.listen_dir)
        cert, key = make_cert(cls.listen_dir)
        cls.listen = ListenServer(token_file, "--tls-cert", cert, "--tls-key", key)
        cls.listen.token, cls.listen.cafile = token, cert
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.listen.stop()
        shutil.rmtree(cls.listen_dir, ignore_errors=True)

    @classmethod
    def connect(cls) -> Client:
        return Client.connect_tcp("127.0.0.1", cls.listen.port, token=cls.listen.token, cafile=cls.listen.cafile)

    def test_close_leaves_nothing(self) -> None:
        self.skipTest("stdio: the server process exits; over TCP, ListenTests.test_run_over_tcp")


class LineReaderTests(unittest.TestCase):
    """The client's line splitter, without a server."""

    def test_interrupted_read_loses_nothing(self) -> None:
        # A read that raises (KeyboardInterrupt in the thread reading, which
        # may be the caller's own: see Client._await) must keep what was
        # read of the line so far: the next reader, on any thread, goes on.
        from gatebridge_client import _LineReader

        class Stream:
            def __init__(self) -> None:
                self.parts: List[Any] = [b'{"a":', KeyboardInterrupt(), b'1}\n{"b"', b":2}\n", b"tail"]

            def read1(self, n: int) -> bytes:
                if not self.parts:
                    return b""
                part = self.parts.pop(0)
                if isinstance(part, BaseException):
                    raise part
                return part

        r = _LineReader(Stream())  # type: ignore[arg-type]
        with self.assertRaises(KeyboardInterrupt):
            r.readline()
        self.assertEqual(r.readline(), b'{"a":1}\n')
        self.assertEqual(r.readline(), b'{"b":2}\n')
        self.assertEqual(r.readline(), b"tail")
        self.assertEqual(r.readline(), b"")
        self.assertEqual(r.readline(), b"", "the end of the stream is sticky")

    def test_read_error_is_sticky(self) -> None:
        from gatebridge_client import _LineReader

        class Broken:
            calls = 0

            def read1(self, n: int) -> bytes:
                Broken.calls += 1
                if Broken.calls == 1:
                    return b"half"
                raise OSError("gone")

        r = _LineReader(Broken())  # type: ignore[arg-type]
        for _ in range(2):
            with self.assertRaises(OSError):
                r.readline()
        self.assertEqual(Broken.calls, 2, "a failed stream was read again")


class Capture:
    """A client (local backend) whose sent messages a test can read."""

    def __init__(self, test: unittest.TestCase) -> None:
        self.client = new_client()
        test.addCleanup(self.client.close)
        self.sent: List[Dict[str, Any]] = []
        send = self.client._send

        def capture(msg: Any) -> None:
            self.sent.append(dict(msg))
            send(msg)

        self.client._send = capture  # type: ignore[method-assign]

    def params(self, method: str) -> Dict[str, Any]:
        """The params of the last request of method."""
        for m in reversed(self.sent):
            if m.get("method") == method:
                return dict(m.get("params") or {})
        raise AssertionError("no %s sent" % method)


class TimeUnitTests(unittest.TestCase):
    """Times in the API are seconds; the protocol's are milliseconds; the
    old *_ms names still work (deprecated) and mean milliseconds."""

    def setUp(self) -> None:
        self.cap = Capture(self)
        self.c = self.cap.client
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        self.sb = self.c.open_sandbox(backend="local", workspace=ws)

    def deprecated(self, fn: Any, *args: Any, **kw: Any) -> Any:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = fn(*args, **kw)
        self.assertTrue([x for x in w if issubclass(x.category, DeprecationWarning)], "no DeprecationWarning")
        self.assertTrue(all(x.filename == __file__ for x in w), [(x.filename, x.lineno) for x in w])
        return out

    def test_seconds_to_milliseconds(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the new names warn about nothing
            self.sb.run("true", timeout=1.5)
            self.assertEqual(self.cap.params("process/start")["timeoutMs"], 1500)
            self.sb.run("true")
            self.assertNotIn("timeoutMs", self.cap.params("process/start"))
            p = self.sb.start("true", stdin=False, timeout=0.0004)  # rounds up to 1 ms, not 0 (= the default)
            self.assertEqual(self.cap.params("process/start")["timeoutMs"], 1)
            p.wait(timeout=WAIT)
            p.read(0, wait=0.25)
            self.assertEqual(self.cap.params("process/read")["waitMs"], 250)
            p.status(timeout=2)
            self.assertEqual(self.cap.params("process/wait")["timeoutMs"], 2000)
            self.c.register_gate("tu_a", lambda call: "", timeout=2.5)
            self.assertEqual(self.cap.params("gate/register")["timeoutMs"], 2500)

            @self.c.gate("tu_b", timeout=3)
            def tu_b(call: GateCall) -> str:
                return ""
            self.assertEqual(self.cap.params("gate/register")["timeoutMs"], 3000)
        for bad in (-1, "5", float("inf"), float("nan"), True):
            with self.assertRaises(TypeError):
                self.sb.run("true", timeout=bad)

    def test_deprecated_milliseconds(self) -> None:
        self.deprecated(self.sb.run, "true", timeout_ms=1500)
        self.assertEqual(self.cap.params("process/start")["timeoutMs"], 1500)
        self.deprecated(self.sb.run, "pwd", None, 1200, None, {"K": "V"})
        self.assertEqual(self.cap.params("process/start")["timeoutMs"], 1200)
        self.assertEqual(self.cap.params("process/start")["env"], {"K": "V"})
        p = self.deprecated(self.sb.start, "true", stdin=False, timeout_ms=700)
        self.assertEqual(self.cap.params("process/start")["timeoutMs"], 700)
        p.wait(timeout=WAIT)
        self.deprecated(p.read, 0, wait_ms=250)
        self.assertEqual(self.cap.params("process/read")["waitMs"], 250)
        self.deprecated(p.read, 0, None, 260)
        self.assertEqual(self.cap.params("process/read")["waitMs"], 260)
        self.deprecated(p.status, timeout_ms=2000)
        self.assertEqual(self.cap.params("process/wait")["timeoutMs"], 2000)
        self.deprecated(p.status, 2100)
        self.assertEqual(self.cap.params("process/wait")["timeoutMs"], 2100)
        self.deprecated(self.c.register_gate, "tu_c", lambda call: "", timeout_ms=2500)
        self.assertEqual(self.cap.params("gate/register")["timeoutMs"], 2500)
        deco = self.deprecated(self.c.gate, "tu_d", timeout_ms=3500)
        deco(lambda call: "")
        self.assertEqual(self.cap.params("gate/register")["timeoutMs"], 3500)
        # 0 meant "the server's default", and still does.
        self.deprecated(self.sb.run, "true", timeout_ms=0)
        self.assertNotIn("timeoutMs", self.cap.params("process/start"))
        with self.assertRaises(TypeError):
            self.sb.run("true", timeout=1, timeout_ms=1000)
        with self.assertRaises(TypeError):
            self.sb.run("true", None, 1000, timeout=1)
        with self.assertRaises(TypeError):
            self.sb.run("true", None, 1000, None, None, "extra")


def fake_server(test: unittest.TestCase, max_line_bytes: int, line: bytes) -> Tuple[Client, Dict[str, Any]]:
    """A client over pipes to a fake server that answers initialize, then
    answers the next request with line (no newline), written until the
    client stops taking it (or 64 MiB). The returned dict says what the
    fake server saw once its thread is done ("thread")."""
    c2s_r, c2s_w = os.pipe()
    s2c_r, s2c_w = os.pipe()
    srv_in, srv_out = os.fdopen(c2s_r, "rb"), os.fdopen(s2c_w, "wb", buffering=0)
    seen: Dict[str, Any] = {"sent": 0, "epipe": False, "eof": False}

    def serve() -> None:
        import json
        try:
            init = json.loads(srv_in.readline())
            srv_out.write(json.dumps({"jsonrpc": "2.0", "id": init["id"], "result": {
                "protocolVersion": 1, "serverVersion": "fake", "backends": [], "limits": {}}}).encode() + b"\n")
            srv_in.readline()  # initialized
            req = json.loads(srv_in.readline())
            head = b'{"jsonrpc":"2.0","id":%d,"result":"' % req["id"]
            srv_out.write(head)
            seen["sent"] = len(head)
            while seen["sent"] < 64 << 20:
                srv_out.write(line)
                seen["sent"] += len(line)
        except BrokenPipeError:
            seen["epipe"] = True
        try:
            seen["eof"] = srv_in.read() == b""
        finally:
            srv_in.close()
            srv_out.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    seen["thread"] = t
    c = Client.connect(os.fdopen(s2c_r, "rb"), os.fdopen(c2s_w, "wb"), max_line_bytes=max_line_bytes)
    test.addCleanup(c.close)
    return c, seen


class QueuedCallsTests(unittest.TestCase):
    """A hostile server cannot make the client hold server requests
    without bound: beyond max_queued_calls waiting for a worker, each is
    answered at once with an error."""

    def test_flood_of_approvals_is_refused_beyond_the_cap(self) -> None:
        import json
        c2s_r, c2s_w = os.pipe()
        s2c_r, s2c_w = os.pipe()
        srv_in, srv_out = os.fdopen(c2s_r, "rb"), os.fdopen(s2c_w, "wb", buffering=0)
        release = threading.Event()
        started = threading.Event()

        def approve(req: ApprovalRequest) -> str:
            started.set()
            release.wait()
            return "allow"

        def handshake() -> None:
            init = json.loads(srv_in.readline())
            srv_out.write(json.dumps({"jsonrpc": "2.0", "id": init["id"], "result": {
                "protocolVersion": 1, "backends": [], "limits": {}}}).encode() + b"\n")
            srv_in.readline()  # initialized

        hs = threading.Thread(target=handshake, daemon=True)
        hs.start()
        c = Client.connect(os.fdopen(s2c_r, "rb"), os.fdopen(c2s_w, "wb"), on_approval=approve, gate_workers=1,
                           max_queued_calls=2)
        self.addCleanup(c.close)
        self.addCleanup(srv_in.close)  # before c.close: the fake server's end, as a real server would
        self.addCleanup(srv_out.close)
        self.addCleanup(release.set)  # first: a reader blocked on srv_in gets its answers, then srv_in closes
        hs.join(WAIT)
        n = 10
        for i in range(n):
            srv_out.write(json.dumps({"jsonrpc": "2.0", "id": "s%d" % i, "method": "approval/request", "params": {
                "callId": "c%d" % i, "gate": "g", "args": [], "sandboxId": "sb", "processId": "p"}}).encode() + b"\n")
        got: List[Dict[str, Any]] = []

        def read(k: int) -> None:
            for _ in range(k):
                got.append(json.loads(srv_in.readline()))

        # One runs (and blocks), two wait: the other seven are refused at
        # once, while the first still blocks. Without the cap they all
        # wait: no answer comes until release.
        t = threading.Thread(target=read, args=(n - 3,), daemon=True)
        t.start()
        t.join(WAIT)
        self.assertFalse(t.is_alive(), "the flood was held, not refused: %d answers" % len(got))
        self.assertTrue(started.wait(WAIT), "the first approval never reached the handler")
        self.assertEqual(sorted(m["id"] for m in got), ["s%d" % i for i in range(3, n)])
        for m in got:
            self.assertEqual(m["error"]["code"], -32003, m)
            self.assertIn("max_queued_calls", m["error"]["message"])
        release.set()
        got.clear()
        read(3)
        self.assertEqual(sorted((m["id"], m["result"]["decision"]) for m in got),
                         [("s0", "allow"), ("s1", "allow"), ("s2", "allow")])


class ErrorClassTests(unittest.TestCase):
    """An error response raises the class of its code (as the TS client's)."""

    def test_classes_by_code(self) -> None:
        from gatebridge_client import (ConflictError, InvalidParamsError, LimitError, MethodNotFoundError,
                                       NotFoundError, UnauthorizedError, UnavailableError, error_for)
        with new_client() as c:
            with self.assertRaises(MethodNotFoundError) as cm:
                c.request("no/such/method")
            self.assertEqual(cm.exception.code, METHOD_NOT_FOUND)
            with self.assertRaises(NotFoundError):
                c.request("process/signal", {"processId": "nosuch", "signal": "TERM"})
            with self.assertRaises(InvalidParamsError) as cm2:
                c.open_sandbox(backend="nosuch", workspace=ROOT)
            self.assertIsInstance(cm2.exception, GatebridgeError)
            c.register_gate("ec_a", lambda call: "")
            with self.assertRaises(ConflictError):
                c.register_gate("ec_a", lambda call: "")
            self.assertEqual(c.sandboxes, [])
            sb = c.open_sandbox(backend="local", workspace=ROOT)
            self.assertEqual(c.sandboxes, [sb])
            sb.close()
            self.assertEqual(c.sandboxes, [])
        e = error_for(UNAVAILABLE, "no docker", {"hint": "start dockerd"})
        self.assertIsInstance(e, UnavailableError)
        self.assertEqual((e.code, e.message, e.hint), (UNAVAILABLE, "no docker", "start dockerd"))
        self.assertIn("hint: start dockerd", str(e))
        self.assertIsInstance(error_for(UNAUTHORIZED, "no"), UnauthorizedError)
        self.assertIsInstance(error_for(-32003, "full"), LimitError)
        self.assertIsInstance(error_for(-32099, "gone"), ConnectionClosedError)
        from gatebridge_client import POLICY_DENIED, PolicyDeniedError
        denied = error_for(POLICY_DENIED, "policy: command rm denied", {"kind": "policy_denied", "hint": "see policy check"})
        self.assertIsInstance(denied, PolicyDeniedError)
        self.assertEqual((denied.code, denied.hint), (-32007, "see policy check"))
        plain = error_for(-1, "odd")
        self.assertIs(type(plain), GatebridgeError)
        self.assertIsNone(plain.hint)


class GateCallReportTests(unittest.TestCase):
    """process/exited's gateCalls from a hostile (or broken) server: a
    malformed report is dropped alone; the exit and the others stay."""

    def test_malformed_report_dropped_alone(self) -> None:
        from gatebridge_client import _gate_calls
        bad = {"callId": "p:1", "gate": "g", "args": ["a"], "argsBase64": ["YQ==", "Yg=="], "exitCode": 0, "decision": "ran"}
        good = {"callId": "p:2", "gate": "g", "args": ["caf\ufffd"], "argsBase64": ["Y2Fm6Q=="], "exitCode": 3,
                "decision": "denied", "decidedBy": "person", "durationMs": 1500, "events": [{"kind": "x"}, 5]}
        with self.assertLogs("gatebridge_client", "WARNING"):
            calls, dropped = _gate_calls({"gateCalls": [bad, 7, {"exitCode": "many"}, good], "gateCallsDropped": "x"})
        self.assertEqual(dropped, 0)
        self.assertEqual([(c.call_id, c.exit_code, c.decision, c.decided_by, c.duration, c.events) for c in calls],
                         [("p:2", 3, "denied", "person", 1.5, [{"kind": "x"}])])
        self.assertEqual(calls[0].args_bytes, [b"caf\xe9"])
        self.assertEqual(_gate_calls({}), ([], 0))


class LineCapTests(unittest.TestCase):
    """A hostile server cannot make the client hold a line without bound."""

    def test_default_is_the_servers_cap(self) -> None:
        self.assertEqual(DEFAULT_MAX_LINE_BYTES, 16 << 20)
        with new_client() as c:
            self.assertEqual(c.limits["maxMessageBytes"], DEFAULT_MAX_LINE_BYTES)

    def check_cut(self, wait_with_timeout: bool) -> None:
        c, seen = fake_server(self, 1 << 20, b"x" * 65536)
        errors: List[BaseException] = []

        def call() -> None:
            try:
                c.request("gate/list", timeout=WAIT if wait_with_timeout else None)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=call, daemon=True)
        t.start()
        # Without the cap the client holds all 64 MiB, then waits for the
        # rest of the line: no answer (or a TimeoutError), not this.
        t.join(WAIT + 5)
        self.assertFalse(t.is_alive(), "the request still waits: the client holds the line")
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0], ConnectionClosedError)
        self.assertIn("over 1048576 bytes (max_line_bytes)", str(errors[0]))
        seen["thread"].join(WAIT)
        self.assertFalse(seen["thread"].is_alive(), "the fake server still writes")
        self.assertTrue(seen["epipe"], "the client did not close its end: the server could go on writing")
        self.assertTrue(seen["eof"], "the client did not close the server's input")
        self.assertLess(seen["sent"], 8 << 20)
        self.assertTrue(c.closed)
        with self.assertRaises(ConnectionClosedError):
            c.request("gate/list", timeout=WAIT)

    def test_long_line_closes_the_connection(self) -> None:
        self.check_cut(True)  # read by the reader thread

    def test_long_line_closes_the_connection_when_the_caller_reads(self) -> None:
        self.check_cut(False)  # read by the waiting thread itself (Client._await)

    def test_line_reader_cap(self) -> None:
        from gatebridge_client import LineTooLongError, _LineReader
        import io
        r = _LineReader(io.BufferedReader(io.BytesIO(b"12345\n123456\nmore\n")), 5)  # type: ignore[arg-type]
        self.assertEqual(r.readline(), b"12345\n")  # exactly the cap: taken
        for _ in range(2):  # sticky
            with self.assertRaises(LineTooLongError):
                r.readline()

        class NoRead1:
            def __init__(self) -> None:
                self.f = io.BytesIO(b"12345\n123456\n")

            def readline(self, n: int = -1) -> bytes:
                return self.f.readline(n)

        r = _LineReader(NoRead1(), 5)  # type: ignore[arg-type]
        self.assertEqual(r.readline(), b"12345\n")
        with self.assertRaises(LineTooLongError):
            r.readline()


class ConnectionTests(unittest.TestCase):
    """The connection's life: shutdown, a server that dies, bad binaries."""

    def test_server_death_raises_instead_of_hanging(self) -> None:
        c = new_client()
        self.addCleanup(c.close)
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        sb = c.open_sandbox(backend="local", workspace=ws)
        # It reads stdin: when the server dies the pipe closes and it ends.
        p = sb.start(["sh", "-c", "read x"])
        errors: List[BaseException] = []

        def waiter() -> None:
            try:
                c.request("process/wait", {"processId": p.id})
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=waiter)
        t.start()
        assert c._proc is not None
        os.kill(c._proc.pid, signal.SIGKILL)
        t.join(WAIT)
        self.assertFalse(t.is_alive(), "a pending request hung after the server died")
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0], ConnectionClosedError)
        self.assertIn("exited", str(errors[0]))
        with self.assertRaises(ConnectionClosedError):
            p.wait(timeout=WAIT)
        with self.assertRaises(ConnectionClosedError):
            sb.run("true")

    def test_connect_over_streams(self) -> None:
        server = subprocess.Popen([BIN, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=server_env())
        self.addCleanup(server.wait, WAIT)
        assert server.stdin is not None and server.stdout is not None
        self.addCleanup(server.stdout.close)
        c = Client.connect(server.stdout, server.stdin)
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        c.register_gate("viaconnect", lambda call: "ok %s\n" % call.args[0])
        r = c.open_sandbox(backend="local", workspace=ws).run("viaconnect 1")
        self.assertEqual(r.stdout, b"ok 1\n")
        c.close()  # closes the server's stdin: it exits
        self.assertEqual(server.wait(WAIT), 0)

    def test_missing_binary(self) -> None:
        with self.assertRaises(FileNotFoundError) as cm:
            Client(["/nonexistent/gatebridge", "serve", "--stdio"])
        self.assertIn("GATEBRIDGE_BIN", str(cm.exception))

    def test_initialize_info(self) -> None:
        with new_client() as c:
            self.assertEqual(c.protocol_version, 1)
            self.assertIn("local", [b["name"] for b in c.backends])
            self.assertGreater(c.limits.get("maxMessageBytes", 0), 0)
            with self.assertRaises(GatebridgeError) as cm:
                c.open_sandbox(backend="nosuch", workspace=ROOT)
            self.assertEqual(cm.exception.code, INVALID_PARAMS)


def make_token(d: str) -> Tuple[str, str]:
    """A fresh token, and the file (0600) in d that holds it."""
    token = uuid.uuid4().hex
    path = os.path.join(d, "token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token, path


def make_cert(d: str) -> Tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key, in d (openssl)."""
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=gatebridge test",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


class ListenServer:
    """``gatebridge serve --listen 127.0.0.1:0 --token-file F`` and its
    log; stopped with SIGTERM."""

    token = ""
    cafile = ""

    def __init__(self, token_file: str, *args: str) -> None:
        env = server_env()
        # These tests run the local backend, which --listen refuses unless
        # the config allows unsandboxed runs.
        env["GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED"] = "true"
        self.proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--token-file", token_file, *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=env)
        assert self.proc.stderr is not None
        self.lines: List[str] = []
        self.cond = threading.Condition()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        with self.cond:
            self.cond.wait_for(lambda: any("listening on" in l for l in self.lines) or self.proc.poll() is not None, WAIT)
        line = next((l for l in self.lines if "listening on" in l), None)
        if line is None:
            self.stop()
            raise AssertionError("the server does not listen: %s" % self.log())
        self.port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self.cond:
                self.lines.append(raw.decode("utf-8", "replace"))
                self.cond.notify_all()

    def log(self) -> str:
        with self.cond:
            return "".join(self.lines)

    def wait_log(self, needle: str) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: needle in "".join(self.lines), WAIT)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self._drainer.join(WAIT)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return code


class ListenTests(unittest.TestCase):
    """Client.connect_tcp against ``gatebridge serve --listen``: the token,
    a command in a sandbox, cleanup when the client closes, TLS."""

    dir: str
    token: str
    token_file: str
    server: ListenServer

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir = tempfile.mkdtemp(prefix="gb-pyclient-listen-")
        cls.token, cls.token_file = make_token(cls.dir)
        cls.server = ListenServer(cls.token_file)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_run_over_tcp(self) -> None:
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        marker = "gbpy-tcp-" + uuid.uuid4().hex
        c = Client.connect_tcp("127.0.0.1", self.server.port, token=self.token)
        self.addCleanup(c.close)
        self.assertIsNone(c.pid)
        self.assertEqual(c.protocol_version, 1)
        c.register_gate("tcp_gate", lambda call: "gate got %s\n" % " ".join(call.args))
        sb = c.open_sandbox(backend="local", workspace=ws)
        r = sb.run("echo over tcp; tcp_gate a b")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, b"over tcp\ngate got a b\n", b""))
        rec = Recorder()
        sb.start(["sh", "-c", "echo up; sleep 30; :", marker], stdin=False, on_output=rec)
        self.assertTrue(rec.wait_for(b"up\n"))
        self.assertTrue(proc_cmdlines_with(marker))
        c.close()  # returns once the server has removed the sandbox
        self.assertEqual(proc_cmdlines_with(marker), [], "a sandboxed process outlived close()")
        self.assertTrue(self.server.wait_log(": disconnected"), self.server.log())
        with self.assertRaises(ConnectionClosedError):
            c.list_gates()
        self.assertNotIn(self.token, self.server.log())

    def test_wrong_token(self) -> None:
        with self.assertRaises(GatebridgeError) as cm:
            Client.connect_tcp("127.0.0.1", self.server.port, token="not-" + self.token)
        self.assertEqual(cm.exception.code, UNAUTHORIZED)
        self.assertIn("wrong authToken", str(cm.exception))
        self.assertIn("hint:", str(cm.exception))
        self.assertNotIn(self.token, self.server.log())
        with self.assertRaises(ValueError):
            Client.connect_tcp("127.0.0.1", self.server.port, token="")

    def test_tls(self) -> None:
        if not shutil.which("openssl"):
            self.skipTest("no openssl to make a certificate")
        cert, key = make_cert(self.dir)
        server = ListenServer(self.token_file, "--tls-cert", cert, "--tls-key", key)
        self.addCleanup(server.stop)
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        with Client.connect_tcp("127.0.0.1", server.port, token=self.token, cafile=cert) as c:
            r = c.open_sandbox(backend="local", workspace=ws).run("echo over tls")
            self.assertEqual(r.stdout, b"over tls\n")
        # The certificate is checked: the system's CAs do not trust it.
        with self.assertRaises(ssl.SSLCertVerificationError):
            Client.connect_tcp("127.0.0.1", server.port, token=self.token, tls=True)


if __name__ == "__main__":
    unittest.main()
