// Package mailbox is the wire format of a gatebridge session, and nothing
// else: its layout and file names, the environment the wrappers read, call
// ids and gate names, and the encodings of the files a call crosses
// ([EncodeArgv], [DecodeArgv], [EncodeExit], [DecodeExit], [StreamLines],
// [AckName], [ParseAck]). It does no I/O. Every other package (the
// wrapper generator, the backends, the conformance suite, the host's
// mailbox server in package bridge) takes names and layout from here;
// none spells them itself. Golden vectors of the encodings are in the
// repository's testdata/vectors (argv.txtar, exit.txtar, ack.txtar): the
// Go tests and the wrappers' tests read them, and so can a second
// implementation.
//
// # Layout
//
//	<root>/bin/          wrappers, one per gate     read-only inside
//	<root>/calls/        written by the sandbox     read-write inside
//	<root>/responses/    written by the host        read-only inside
//	<root>/tmp/          scratch (local backend)    read-write inside
//
// # One call (v2, what the wrappers write)
//
//	calls/<id>/argv     the caller's working directory (as the sandbox sees
//	                    it; may be empty), the gate name, then the
//	                    arguments, each ended by a NUL byte
//	calls/<id>/stdin    optional: what the wrapper read from stdin
//	calls/<id>/wake     optional FIFO the host writes a byte to
//	calls/<id>/ready    empty marker, written LAST: the call exists once it does
//	responses/<id>.exit the answer, written LAST and atomically:
//	                      line 1: the exit code
//	                      line 2: "i": the output follows inline, one line
//	                              per output line, prefixed o (stdout) or
//	                              e (stderr); O and E mark a last line that
//	                              had no newline (at most InlineMax bytes of
//	                              ASCII without NUL)
//	                              "f": the output is in <id>.stdout and
//	                              <id>.stderr (large, or holding NUL bytes)
//	responses/<id>.stream  a gate still running after 50 ms: its output so far,
//	                    in the inline line format, appended as it is written
//	                    (the exit file then holds only what was not streamed)
//	calls/<id>/cancel   optional: the wrapper was stopped by a signal while
//	                    it waited (the host cancels the gate, answers nothing)
//	calls/<id>.done     the wrapper's acknowledgement: the host removes the
//	                    response
//
// A call directory is either made by the wrapper (mkdir calls/<id>) or a
// slot the host prepared (calls/_N, see [SlotPrefix]), which the wrapper
// claims by creating argv with O_EXCL (set -C): then a call starts no
// process besides the wrapper.
//
// A small answer thus crosses four files (argv, ready, .exit, .done) and one
// wake byte.
//
// # One call (v1, still answered)
//
// calls/<id>/args/0 … args/N-1 (one file per argument), calls/<id>/gate, an
// empty ready; the answer is <id>.stdout, <id>.stderr and <id>.exit holding
// only the code. A call is v1 when it has no argv file.
//
// # Hostile input
//
// Everything under calls/ is written by the sandbox. The host (package
// bridge, with internal/hostilefs) opens it relative to directory
// descriptors, one component at a time, with O_NOFOLLOW|O_NONBLOCK; only
// regular files with one link are read, every read is capped ([Limits],
// [ArgvMax]), and ids and gate names are validated ([ValidID],
// [ValidateName]) before use.
package mailbox
