# Sourced by bench-docker.sh and bench-runtimes.sh from the repository's
# root, with $tmp (a private directory) and $IMG set: GB, the gatebridge
# under test (built static when not given, as make build makes it: a
# persistent sandbox then runs it as its agent, without the exec API);
# ws, an empty workspace under $tmp, made the current directory; the
# image checked.
# shellcheck shell=bash
if [ -z "${GB:-}" ]; then
	GB=$tmp/gatebridge
	CGO_ENABLED=0 go build -o "$GB" ./cmd/gatebridge
fi
ws=$tmp/ws
mkdir -p "$ws"
chmod 755 "$tmp" "$ws"
cd "$ws"
docker image inspect "$IMG" >/dev/null 2>&1 || { echo "image $IMG missing: run make test-image" >&2; exit 1; }
