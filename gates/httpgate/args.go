package httpgate

import (
	"math"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/gatebridge/gatebridge/gates"
)

// request is what one call asks for, parsed from its arguments.
type request struct {
	method   string // "" until defaulted
	headers  []header
	data     []string // -d / --data-binary pieces, joined with &
	hasData  bool
	include  bool // -i
	fail     bool // -f
	location bool // -L
	maxTime  time.Duration
	url      string
}

// header is one -H: name canonical; an empty value removes a default
// header (User-Agent, Content-Type).
type header struct{ name, value string }

// parseArgs reads the curl-like arguments. stdin is what the wrapper sent
// (nil: nothing). Errors are usage (2) or policy (126) errors.
func parseArgs(args []string, stdin []byte, maxBody int64) (*request, error) {
	r := &request{}
	needStdin := false
	value := func(i *int, opt string) (string, error) {
		if *i+1 >= len(args) {
			return "", gates.Usagef("%s needs a value", opt)
		}
		*i++
		return args[*i], nil
	}
	addData := func(v string, binary bool) error {
		r.hasData = true
		if v == "@-" {
			if stdin == nil {
				return gates.Usagef("@- reads the request body from stdin, but none was sent (is stdin a terminal?)")
			}
			if needStdin {
				return gates.Usagef("@- may be given once")
			}
			needStdin = true
			v = string(stdin)
			if !binary { // curl -d @file drops line breaks
				v = strings.NewReplacer("\r", "", "\n", "").Replace(v)
			}
		} else if strings.HasPrefix(v, "@") {
			return gates.Usagef("%s: the host cannot read files of the sandbox; send one as stdin: --data-binary @- < FILE", cut(v, 40))
		}
		r.data = append(r.data, v)
		return nil
	}
	positional := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if positional || a == "" || a[0] != '-' || a == "-" {
			if r.url != "" {
				return nil, gates.Usagef("one URL only (got %q and %q)", cut(r.url, 60), cut(a, 60))
			}
			r.url = a
			continue
		}
		var err error
		var v string
		switch name, inline, hasInline := strings.Cut(a, "="); {
		case a == "--":
			positional = true
		case a == "--include":
			r.include = true
		case a == "--fail":
			r.fail = true
		case a == "--location":
			r.location = true
		case a == "--silent", a == "--show-error":
		case strings.HasPrefix(a, "--"):
			if hasInline {
				v = inline
			} else if name == "--request" || name == "--header" || name == "--data" || name == "--data-binary" || name == "--data-raw" || name == "--max-time" {
				if v, err = value(&i, name); err != nil {
					return nil, err
				}
			}
			switch name {
			case "--request":
				r.method = v
			case "--header":
				err = r.addHeader(v)
			case "--data", "--data-ascii":
				err = addData(v, false)
			case "--data-binary":
				err = addData(v, true)
			case "--data-raw":
				r.hasData = true
				r.data = append(r.data, v)
			case "--max-time":
				r.maxTime, err = parseSeconds(v)
			default:
				return nil, gates.Usagef("unknown option %s (see --help)", cut(name, 40))
			}
		default:
			// A cluster of short options: -sSfL, -XPOST, -sH 'A: b'.
		cluster:
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch c {
				case 'i':
					r.include = true
				case 'f':
					r.fail = true
				case 'L':
					r.location = true
				case 's', 'S':
				case 'X', 'H', 'd', 'm':
					if j+1 < len(a) {
						v = a[j+1:]
					} else if v, err = value(&i, "-"+string(c)); err != nil {
						return nil, err
					}
					switch c {
					case 'X':
						r.method = v
					case 'H':
						err = r.addHeader(v)
					case 'd':
						err = addData(v, false)
					case 'm':
						r.maxTime, err = parseSeconds(v)
					}
					break cluster
				default:
					return nil, gates.Usagef("unknown option -%c in %s (see --help)", c, cut(a, 20))
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if r.url == "" {
		return nil, gates.Usagef("no URL given")
	}
	if r.method == "" {
		r.method = "GET"
		if r.hasData {
			r.method = "POST"
		}
	}
	r.method = strings.ToUpper(r.method)
	if !httpguts.ValidHeaderFieldName(r.method) { // a token, as a method is
		return nil, gates.Usagef("bad method %q", cut(r.method, 20))
	}
	if r.method == "CONNECT" {
		return nil, gates.Deniedf("method CONNECT is not allowed")
	}
	if n := r.bodyLen(); int64(n) > maxBody {
		return nil, gates.Deniedf("the request body is %d bytes, over max_request_bytes (%d)", n, maxBody)
	}
	return r, nil
}

// bodyLen is the length of the body the pieces make.
func (r *request) bodyLen() int {
	n := 0
	for i, d := range r.data {
		if i > 0 {
			n++
		}
		n += len(d)
	}
	return n
}

func (r *request) body() string { return strings.Join(r.data, "&") }

// Headers the sandbox may not set: the request's framing and routing are
// gatebridge's (Host, hop-by-hop ones, Content-Length), and proxies get
// nothing from it.
var refusedHeaders = map[string]bool{
	"Host": true, "Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

// headerRefusal says why the sandbox (or a rule) may not set name, or "".
func headerRefusal(name string) string {
	if refusedHeaders[name] || strings.HasPrefix(name, "Proxy-") {
		return "it is the request's framing or a proxy's (Host, hop-by-hop, Content-Length, Proxy-*)"
	}
	return ""
}

// Headers the sandbox may not set because they change the form of the
// response, not its content: a secret a server quotes back must reach the
// redactor as the bytes of its value. With an Accept-Encoding of its own
// the body comes compressed (the gate decodes gzip only when it asked for
// it itself); with a Range it comes in pieces, each shorter than the
// value and none redacted.
var reshapingHeaders = map[string]bool{"Accept-Encoding": true, "Range": true, "If-Range": true}

// Headers that ask a server for another method than the request's
// (Rails, Express's method-override, Google's APIs honour them): a rule
// that allows GET must not let the sandbox DELETE.
var methodHeaders = map[string]bool{"X-Http-Method-Override": true, "X-Http-Method": true, "X-Method-Override": true}

// addHeader reads -H 'Name: value' ('Name:' removes a default header).
func (r *request) addHeader(h string) error {
	if strings.ContainsAny(h, "\r\n\x00") {
		return gates.Deniedf("a header with a line break or a NUL byte is refused")
	}
	name, value, ok := strings.Cut(h, ":")
	name = strings.TrimSpace(name)
	if !ok || !httpguts.ValidHeaderFieldName(name) {
		return gates.Usagef("bad header %q: want 'Name: value'", cut(h, 60))
	}
	value = strings.TrimSpace(value)
	if !httpguts.ValidHeaderFieldValue(value) {
		return gates.Deniedf("header %s: the value holds control characters", name)
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	if why := headerRefusal(name); why != "" {
		return gates.Deniedf("header %s is refused: %s", name, why)
	}
	if methodHeaders[name] {
		return gates.Deniedf("header %s is refused: a server that honours it would run another method than the one a rule allowed", name)
	}
	if reshapingHeaders[name] {
		return gates.Deniedf("header %s is refused: it would let a secret a server quotes back slip past redaction (compressed, or in pieces); the gate asks for gzip itself and decodes it", name)
	}
	r.headers = append(r.headers, header{name, value})
	return nil
}

// parseSeconds reads --max-time S (seconds, fractions allowed).
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e6 {
		return 0, gates.Usagef("--max-time %q: want seconds, e.g. 10 or 0.5", cut(s, 20))
	}
	return time.Duration(f * float64(time.Second)), nil
}
