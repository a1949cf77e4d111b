package rpc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var updateSchema = flag.Bool("update", false, "rewrite docs/protocol.schema.json from Schema()")

const schemaFile = "../../docs/protocol.schema.json"

// TestSchemaUpToDate fails when docs/protocol.schema.json is not what
// Schema() generates from the Go types (-update rewrites it).
func TestSchemaUpToDate(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, again) {
		t.Fatal("Schema() is not deterministic")
	}
	if *updateSchema {
		if err := os.WriteFile(schemaFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v\nrun: go test ./bridge/rpc -run TestSchemaUpToDate -update", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		t.Fatalf("docs/protocol.schema.json is out of date (first difference at line %d)\nrun: go test ./bridge/rpc -run TestSchemaUpToDate -update", line+1)
	}
}

func svLoad(t *testing.T) *svValidator {
	t.Helper()
	b, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	var root any
	if err := svDecode(b, &root); err != nil {
		t.Fatal(err)
	}
	return &svValidator{root: root}
}

func svDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// schemaExamples are real protocol lines: valid ones (want == "") must
// match both the root schema and the named definition; invalid ones must
// match neither, with an error that mentions want.
var schemaExamples = []struct {
	def, line, want string
}{
	// Lifecycle.
	{"InitializeRequest", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"my-agent","protocolVersion":1}}`, ""},
	{"InitializeResponse", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"serverVersion":"v0.9.0","backends":[{"name":"local","summary":"a host process","isolates":"nothing"}],"limits":{"maxMessageBytes":16777216,"maxSandboxes":16,"maxProcesses":64,"maxPendingGateCalls":64,"maxRetainedBytes":1048576,"maxReplayBytes":4194304,"defaultTimeoutMs":0,"gateTimeoutMs":60000,"approvalTimeoutMs":300000,"maxFsChunkBytes":1048576,"maxFsFileBytes":4194304,"maxGateCalls":100}}}`, ""},
	{"InitializedNotification", `{"jsonrpc":"2.0","method":"initialized"}`, ""},
	{"InitializedNotification", `{"jsonrpc":"2.0","method":"initialized","params":{}}`, ""},
	{"InitializeRequest", `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"clientName":"x","protocolVersion":"1"}}`, "protocolVersion"},
	{"InitializeRequest", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"x"}}`, "protocolVersion"},
	{"InitializeRequest", `{"jsonrpc":"1.0","id":1,"method":"initialize","params":{"clientName":"x","protocolVersion":1}}`, "jsonrpc"},
	{"InitializeRequest", `{"jsonrpc":"2.0","id":{"n":1},"method":"initialize","params":{"clientName":"x","protocolVersion":1}}`, "id"},
	{"InitializeRequest", `{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"clientName":"x","protocolVersion":1}}`, "id"},
	// Sandboxes.
	{"SandboxOpenRequest", `{"jsonrpc":"2.0","id":2,"method":"sandbox/open","params":{"sandboxId":"sb1","backend":"auto","workspace":"/home/me/project","env":{"LANG":"C.UTF-8"}}}`, ""},
	{"SandboxOpenResponse", `{"jsonrpc":"2.0","id":2,"result":{"sandboxId":"sb1","backend":"bwrap","reason":"auto: bwrap works here","workspaceInside":"/home/me/project"}}`, ""},
	{"SandboxOpenRequest", `{"jsonrpc":"2.0","id":2,"method":"sandbox/open","params":{"sandboxId":"sb1","backend":"firecracker","workspace":"/w"}}`, "backend"},
	{"SandboxOpenRequest", `{"jsonrpc":"2.0","id":2,"method":"sandbox/open","params":{"sandboxId":"sb1","backend":"local","workspaceDir":"/w"}}`, "workspace"},
	{"SandboxOpenRequest", `{"jsonrpc":"2.0","id":2,"method":"sandbox/open","params":{"sandboxId":"sb1","backend":"local","workspace":"/w","env":{"N":1}}}`, "env"},
	{"SandboxCloseRequest", `{"jsonrpc":"2.0","id":3,"method":"sandbox/close","params":{"sandboxId":"sb1"}}`, ""},
	{"SandboxCloseResponse", `{"jsonrpc":"2.0","id":3,"result":{}}`, ""},
	// Gates.
	{"GateRegisterRequest", `{"jsonrpc":"2.0","id":4,"method":"gate/register","params":{"name":"ask_user","summary":"ask the user a question","usage":"ask_user QUESTION","params":[{"name":"question","description":"what to ask","required":true}],"approval":true}}`, ""},
	{"GateRegisterRequest", `{"jsonrpc":"2.0","id":4,"method":"gate/register","params":{"name":"remember","summary":"store a note","usage":"","inputSchema":{"type":"object","properties":{"note":{"type":"string"}}},"stdin":"if-no-args","timeoutMs":5000}}`, ""},
	{"GateRegisterRequest", `{"jsonrpc":"2.0","id":4,"method":"gate/register","params":{"name":"x","summary":"","usage":"","stdin":"sometimes"}}`, "stdin"},
	{"GateListResponse", `{"jsonrpc":"2.0","id":5,"result":[{"name":"ask_user","summary":"ask the user a question","usage":"ask_user QUESTION","params":[{"name":"question","description":"what to ask","required":true}],"stdin":"none","kind":"runtime"}]}`, ""},
	{"GateUnregisterRequest", `{"jsonrpc":"2.0","id":6,"method":"gate/unregister","params":{"name":"ask_user"}}`, ""},
	// Processes.
	{"ProcessStartRequest", `{"jsonrpc":"2.0","id":7,"method":"process/start","params":{"processId":"p1","sandboxId":"sb1","argv":["bash","-c","echo hi; ask_user 'ok?'"],"cwd":"src","env":{"DEBUG":"1"},"stdin":true,"timeoutMs":30000}}`, ""},
	{"ProcessStartResponse", `{"jsonrpc":"2.0","id":7,"result":{"processId":"p1"}}`, ""},
	{"ProcessStartRequest", `{"jsonrpc":"2.0","id":7,"method":"process/start","params":{"processId":"p1","sandboxId":"sb1"}}`, "argv"},
	{"ProcessStartRequest", `{"jsonrpc":"2.0","id":7,"method":"process/start","params":{"processId":"p1","sandboxId":"sb1","argv":"ls -l"}}`, "argv"},
	{"ProcessStartRequest", `{"jsonrpc":"2.0","id":7,"method":"process/start","params":{"processId":"p1","sandboxId":"sb1","argv":["ls",1]}}`, "argv/1"},
	{"ProcessStartRequest", `{"jsonrpc":"2.0","id":7,"method":"process/start"}`, "params"},
	{"ProcessWriteRequest", `{"jsonrpc":"2.0","id":8,"method":"process/write","params":{"processId":"p1","chunk":"aGVsbG8K"}}`, ""},
	// contentEncoding is only an annotation to standard draft 2020-12
	// validators; this test's validator asserts it.
	{"ProcessWriteRequest", `{"jsonrpc":"2.0","id":8,"method":"process/write","params":{"processId":"p1","chunk":"hello!"}}`, "base64"},
	{"ProcessCloseStdinRequest", `{"jsonrpc":"2.0","id":9,"method":"process/closeStdin","params":{"processId":"p1"}}`, ""},
	{"ProcessSignalRequest", `{"jsonrpc":"2.0","id":10,"method":"process/signal","params":{"processId":"p1","signal":"TERM"}}`, ""},
	{"ProcessSignalRequest", `{"jsonrpc":"2.0","id":10,"method":"process/signal","params":{"processId":"p1","signal":"STOP"}}`, "signal"},
	{"ProcessWaitRequest", `{"jsonrpc":"2.0","id":11,"method":"process/wait","params":{"processId":"p1","timeoutMs":1000}}`, ""},
	{"ProcessWaitResponse", `{"jsonrpc":"2.0","id":11,"result":{"exitCode":null,"timedOut":false,"running":true}}`, ""},
	{"ProcessWaitResponse", `{"jsonrpc":"2.0","id":11,"result":{"exitCode":143,"signal":"TERM","timedOut":false,"running":false}}`, ""},
	{"ProcessWaitResponse", `{"jsonrpc":"2.0","id":11,"result":{"exitCode":"0","timedOut":false,"running":false}}`, "exitCode"},
	{"ProcessWaitResponse", `{"jsonrpc":"2.0","id":11,"result":{"timedOut":false,"running":true}}`, "exitCode"},
	{"ProcessReadRequest", `{"jsonrpc":"2.0","id":12,"method":"process/read","params":{"processId":"p1","afterSeq":0,"waitMs":500}}`, ""},
	{"ProcessReadResponse", `{"jsonrpc":"2.0","id":12,"result":{"chunks":[{"seq":1,"stream":"stdout","chunk":"aGkK"}],"exited":true,"exitCode":0,"firstSeq":1,"nextSeq":2}}`, ""},
	{"ProcessReadResponse", `{"jsonrpc":"2.0","id":12,"result":{"chunks":[{"seq":1,"stream":"stdin","chunk":"aGkK"}],"exited":true,"exitCode":0,"firstSeq":1,"nextSeq":2}}`, "stream"},
	{"ProcessSnapshotResponse", `{"jsonrpc":"2.0","id":13,"result":{"stdout":"aGkK","stderr":"","truncated":false,"omittedBytes":0,"exitCode":0,"running":false}}`, ""},
	{"ProcessListRequest", `{"jsonrpc":"2.0","id":14,"method":"process/list"}`, ""},
	{"ProcessListRequest", `{"jsonrpc":"2.0","id":14,"method":"process/list","params":{"sandboxId":"sb1"}}`, "sandboxId"},
	{"ProcessListResponse", `{"jsonrpc":"2.0","id":14,"result":{"processes":[{"processId":"p1","sandboxId":"sb1","argv":["true"],"running":false,"exitCode":0}]}}`, ""},
	{"ProcessOutputNotification", `{"jsonrpc":"2.0","method":"process/output","params":{"processId":"p1","seq":1,"stream":"stdout","chunk":"aGkK"}}`, ""},
	{"ProcessOutputNotification", `{"jsonrpc":"2.0","id":1,"method":"process/output","params":{"processId":"p1","seq":1,"stream":"stdout","chunk":"aGkK"}}`, "id"},
	{"ProcessExitedNotification", `{"jsonrpc":"2.0","method":"process/exited","params":{"processId":"p1","exitCode":0,"timedOut":false,"gateCalls":[]}}`, ""},
	{"ProcessExitedNotification", `{"jsonrpc":"2.0","method":"process/exited","params":{"processId":"p1","exitCode":null,"timedOut":false,"gateCalls":[]}}`, "exitCode"},
	{"ProcessExitedNotification", `{"jsonrpc":"2.0","method":"process/exited","params":{"processId":"p1","exitCode":0,"timedOut":false}}`, "gateCalls"},
	{"ProcessExitedNotification", `{"jsonrpc":"2.0","method":"process/exited","params":{"processId":"p1","exitCode":0,"timedOut":false,"gateCalls":[{"callId":"_1","gate":"g","args":["caf\ufffd"],"argsBase64":["Y2Fm6Q=="],"exitCode":126,"decision":"denied","decidedBy":"person","durationMs":1.5,"bytesIn":5,"bytesOut":40,"error":"not approved: no"}],"gateCallsDropped":3}}`, ""},
	{"ProcessExitedNotification", `{"jsonrpc":"2.0","method":"process/exited","params":{"processId":"p1","exitCode":0,"timedOut":false,"gateCalls":[{"callId":"_1","gate":"g","args":[],"exitCode":0,"decision":"maybe","durationMs":1,"bytesIn":1,"bytesOut":0}]}}`, "decision"},
	{"ProcessGateCallNotification", `{"jsonrpc":"2.0","method":"process/gateCall","params":{"processId":"p1","call":{"callId":"_1","gate":"g","args":["x"],"exitCode":0,"decision":"ran","durationMs":0.2,"bytesIn":2,"bytesOut":0}}}`, ""},
	// The runtime answers.
	{"GateCallRequest", `{"jsonrpc":"2.0","id":"s1","method":"gate/call","params":{"callId":"p1:c1","gate":"ask_user","args":["ok?"],"stdin":null,"cwd":"/home/me/project/src","processId":"p1","sandboxId":"sb1","deadlineMs":1767225600000}}`, ""},
	{"GateOutputNotification", `{"jsonrpc":"2.0","method":"gate/output","params":{"callId":"p1:c1","stream":"stderr","chunk":"dGhpbmtpbmcuLi4K"}}`, ""},
	{"GateCallResponse", `{"jsonrpc":"2.0","id":"s1","result":{"exitCode":0,"stdout":"eWVzCg=="}}`, ""},
	{"GateCallResponse", `{"jsonrpc":"2.0","id":"s1","result":{"stdout":"eWVzCg=="}}`, "exitCode"},
	{"ApprovalRequestRequest", `{"jsonrpc":"2.0","id":"s2","method":"approval/request","params":{"callId":"p1:c2","gate":"ask_user","args":["ok?"],"sandboxId":"sb1","processId":"p1"}}`, ""},
	{"ApprovalRequestResponse", `{"jsonrpc":"2.0","id":"s2","result":{"decision":"allowForSession"}}`, ""},
	{"ApprovalRequestResponse", `{"jsonrpc":"2.0","id":"s2","result":{"decision":"deny","reason":"not now"}}`, ""},
	{"ApprovalRequestResponse", `{"jsonrpc":"2.0","id":"s2","result":{"decision":"maybe"}}`, "decision"},
	{"CancelRequestNotification", `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"s1"}}`, ""},
	{"CancelRequestNotification", `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":[1]}}`, "id"},
	// Errors.
	{"ErrorResponse", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: invalid character 'x' looking for beginning of value"}}`, ""},
	{"ErrorResponse", `{"jsonrpc":"2.0","id":7,"error":{"code":-32004,"message":"bwrap: unavailable","data":{"backend":"bwrap","hint":"install bubblewrap"}}}`, ""},
	{"ErrorResponse", `{"jsonrpc":"2.0","id":7,"error":{"message":"no code"}}`, "code"},
	{"ErrorResponse", `{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"both"}}`, "result"},
	// Not a message of the protocol at all.
	{"Request", `{"jsonrpc":"2.0","id":1,"method":"process/frobnicate","params":{}}`, "method"},
	{"Request", `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, "object"},
}

// TestSchemaExamples checks that the schema accepts real messages and
// refuses broken ones, with the validator below.
func TestSchemaExamples(t *testing.T) {
	v := svLoad(t)
	for _, ex := range schemaExamples {
		var msg any
		if err := svDecode([]byte(ex.line), &msg); err != nil {
			t.Fatalf("%s: example is not JSON: %v", ex.line, err)
		}
		defErr := v.validateRef(schemaRef(ex.def), msg)
		rootErr := v.validate(v.root, msg, "")
		if ex.want == "" {
			if defErr != nil {
				t.Errorf("%s: %s refused a valid message: %v", ex.line, ex.def, defErr)
			}
			if rootErr != nil {
				t.Errorf("%s: the schema refused a valid message: %v", ex.line, rootErr)
			}
			continue
		}
		// The generic Request accepts any method: only the root refuses
		// one the protocol does not have.
		if ex.def != "Request" && defErr == nil {
			t.Errorf("%s: %s accepted an invalid message", ex.line, ex.def)
		} else if defErr != nil && !strings.Contains(defErr.Error(), ex.want) {
			t.Errorf("%s: %s: error %q does not mention %q", ex.line, ex.def, defErr, ex.want)
		}
		if rootErr == nil {
			t.Errorf("%s: the schema accepted an invalid message", ex.line)
		} else if !strings.Contains(rootErr.Error(), ex.want) {
			t.Errorf("%s: error %q does not mention %q", ex.line, rootErr, ex.want)
		}
	}
}

// TestSchemaCoversTypes checks that the method table has every Method*
// constant of types.go, and $defs every struct type of types.go.
func TestSchemaCoversTypes(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := svLoad(t)
	defs := v.root.(map[string]any)["$defs"].(map[string]any)
	methods := 0
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range gd.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if !strings.HasPrefix(n.Name, "Method") || i >= len(s.Values) {
						continue
					}
					lit, ok := s.Values[i].(*ast.BasicLit)
					if !ok {
						t.Errorf("%s: not a string literal", n.Name)
						continue
					}
					m, _ := strconv.Unquote(lit.Value)
					methods++
					if _, ok := protocolMethods[m]; !ok {
						t.Errorf("%s (%q) is missing from protocolMethods in schema.go", n.Name, m)
					}
				}
			case *ast.TypeSpec:
				if _, isStruct := s.Type.(*ast.StructType); !isStruct || s.Assign != 0 || !s.Name.IsExported() || s.Name.Name == "Message" {
					continue
				}
				if defs[s.Name.Name] == nil {
					t.Errorf("type %s of types.go is in no message of the schema (add it to protocolMethods)", s.Name.Name)
				}
			}
		}
	}
	if methods != len(protocolMethods) {
		t.Errorf("types.go has %d Method* constants, protocolMethods %d entries", methods, len(protocolMethods))
	}
}

// TestSchemaDocumented checks that docs/jsonrpc.md names every method
// and every field of the wire types (in backticks).
func TestSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/jsonrpc.md")
	if err != nil {
		t.Fatal(err)
	}
	var spans []string
	for _, m := range regexp.MustCompile("`[^`\n]+`").FindAll(doc, -1) {
		spans = append(spans, string(m))
	}
	named := func(name string) bool {
		word := regexp.MustCompile(`(^|[^A-Za-z0-9_$/])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_/])`)
		for _, s := range spans {
			if word.MatchString(strings.Trim(s, "`")) {
				return true
			}
		}
		return false
	}
	for m := range protocolMethods {
		if !named(m) {
			t.Errorf("docs/jsonrpc.md does not name the method %s", m)
		}
	}
	v := svLoad(t)
	svCheckDocExamples(t, v, doc)
	defs := v.root.(map[string]any)["$defs"].(map[string]any)
	for _, name := range svSortedKeys(defs) {
		props, _ := defs[name].(map[string]any)["properties"].(map[string]any)
		for _, p := range svSortedKeys(props) {
			if !named(p) {
				t.Errorf("docs/jsonrpc.md does not name the field %s of %s", p, name)
			}
		}
	}
}

// svCheckDocExamples validates the example lines of docs/jsonrpc.md ("-> "
// sent to the server, "<- " sent by it) against the schema. A line that is
// not JSON (shortened with …) is skipped, and so is a request the next
// line answers with a parse, request, method or params error: those are
// examples of bad input.
func svCheckDocExamples(t *testing.T, v *svValidator, doc []byte) {
	t.Helper()
	type example struct {
		line int
		text string
	}
	var exs []example
	for i, l := range strings.Split(string(doc), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "-> ") || strings.HasPrefix(l, "<- ") {
			exs = append(exs, example{i + 1, l})
		}
	}
	if len(exs) < 40 {
		t.Errorf("docs/jsonrpc.md has %d example lines; the test expects more", len(exs))
	}
	badInput := map[string]bool{"-32700": true, "-32600": true, "-32601": true, "-32602": true}
	for i, ex := range exs {
		var msg any
		if svDecode([]byte(ex.text[3:]), &msg) != nil {
			continue
		}
		if strings.HasPrefix(ex.text, "-> ") && i+1 < len(exs) {
			var next struct {
				Error *struct {
					Code json.Number `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(exs[i+1].text[3:]), &next) == nil && next.Error != nil && badInput[next.Error.Code.String()] {
				continue
			}
		}
		if err := v.validate(v.root, msg, ""); err != nil {
			t.Errorf("docs/jsonrpc.md:%d: the example is not a valid message: %v", ex.line, err)
		}
	}
}

// TestSchemaMatchesEncoding marshals values of every params and result
// type with encoding/json, once with every field set and once with only
// the fields without omitempty, and checks the messages against the
// schema: the schema describes what the Go types really send.
func TestSchemaMatchesEncoding(t *testing.T) {
	v := svLoad(t)
	names := make([]string, 0, len(protocolMethods))
	for m := range protocolMethods {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		spec := protocolMethods[m]
		for _, full := range []bool{true, false} {
			msg := map[string]any{"jsonrpc": "2.0", "method": m, "params": svFill(reflect.TypeOf(spec.params), "", full).Interface()}
			def := schemaDefName(m) + "Notification"
			if spec.result != nil {
				msg["id"] = 7
				def = schemaDefName(m) + "Request"
			}
			svCheckEncoded(t, v, def, msg)
			if spec.result != nil {
				resp := map[string]any{"jsonrpc": "2.0", "id": "s7", "result": svFill(reflect.TypeOf(spec.result), "", full).Interface()}
				svCheckEncoded(t, v, schemaDefName(m)+"Response", resp)
			}
		}
	}
	for _, full := range []bool{true, false} {
		e := svFill(reflect.TypeFor[Error](), "", full).Interface()
		svCheckEncoded(t, v, "ErrorResponse", map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
	}
}

func svCheckEncoded(t *testing.T, v *svValidator, def string, msg any) {
	t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := svDecode(b, &x); err != nil {
		t.Fatal(err)
	}
	if err := v.validateRef(schemaRef(def), x); err != nil {
		t.Errorf("%s: %s\n%v", def, b, err)
	}
	if err := v.validate(v.root, x, ""); err != nil {
		t.Errorf("root: %s\n%v", b, err)
	}
}

// svFill makes a value of t: with full, every field set (one element in
// every slice and map); else only what encoding/json must send (fields
// without omitempty, at their smallest: empty slices, nil pointers).
// Strings take the first allowed value of fieldNotes. key is the
// fieldNotes key of the field being filled.
func svFill(t reflect.Type, key string, full bool) reflect.Value {
	v := reflect.New(t).Elem()
	note := fieldNotes[key]
	switch {
	case t == rawMessageType:
		s := `{"any":["json",1]}`
		if note.ref == "RequestId" {
			s = `"s1"`
		}
		v.SetBytes([]byte(s))
		return v
	case t.Kind() == reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"hint": "h"}))
		return v
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(full)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if full {
			v.SetInt(1)
		}
	case reflect.Float32, reflect.Float64:
		if full {
			v.SetFloat(1.5)
		}
	case reflect.String:
		switch {
		case len(note.enum) > 0:
			v.SetString(note.enum[len(note.enum)-1])
		case full:
			v.SetString("x")
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if full {
				v.SetBytes([]byte{0, 1, 0xff, 'h', 'i'})
			} else if !note.nullable {
				v.SetBytes([]byte{})
			}
			return v
		}
		v.Set(reflect.MakeSlice(t, 0, 1))
		if full {
			v.Set(reflect.Append(v, svFill(t.Elem(), "", full)))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		if full {
			v.SetMapIndex(reflect.ValueOf("K"), svFill(t.Elem(), "", full))
		}
	case reflect.Pointer:
		if full {
			v.Set(reflect.New(t.Elem()))
			v.Elem().Set(svFill(t.Elem(), "", full))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			jname, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || jname == "-" {
				continue
			}
			if !full && strings.Contains(opts, "omitempty") {
				continue
			}
			v.Field(i).Set(svFill(f.Type, t.Name()+"."+jname, full))
		}
	default:
		panic("fill: " + t.String())
	}
	return v
}

// svValidator checks JSON values (decoded with UseNumber) against the
// schema: the keywords the generated schema uses ($ref, type, const, enum,
// properties, required, additionalProperties, items, anyOf, oneOf,
// contentEncoding base64). A keyword it does not know fails the check, so
// the schema cannot rely on one the validator silently skips.
type svValidator struct{ root any }

// vError is a validation failure at a JSON pointer into the value.
type vError struct {
	path, msg string
}

func (e *vError) Error() string {
	p := e.path
	if p == "" {
		p = "/"
	}
	return p + ": " + e.msg
}

// vErrors are the failures of one value; evidence counts the const
// keywords that matched on the way (how well the value fits the schema:
// of the alternatives of an anyOf, the failures of the best fit are
// reported, e.g. of the message whose method matched).
type vErrors struct {
	errs     []*vError
	evidence int
}

func (r *vErrors) add(path, format string, args ...any) {
	r.errs = append(r.errs, &vError{path, fmt.Sprintf(format, args...)})
}

func (r *vErrors) merge(o vErrors) {
	r.errs = append(r.errs, o.errs...)
	r.evidence += o.evidence
}

// svAnnotations are keywords that do not constrain values.
var svAnnotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "title": true, "description": true}

// validate returns nil when x matches schema, else the failures (at most
// a few) in one error.
func (v *svValidator) validate(schema, x any, path string) error {
	r, err := v.check(schema, x, path)
	if err != nil {
		return err
	}
	switch len(r.errs) {
	case 0:
		return nil
	case 1:
		return r.errs[0]
	}
	msgs := make([]string, 0, 4)
	for i, e := range r.errs {
		if i == 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(r.errs)-3))
			break
		}
		msgs = append(msgs, e.Error())
	}
	return errors.New(strings.Join(msgs, "; "))
}

func (v *svValidator) validateRef(ref string, x any) error {
	s, err := v.resolve(ref)
	if err != nil {
		return err
	}
	return v.validate(s, x, "")
}

func (v *svValidator) resolve(ref string) (any, error) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only local references are supported", ref)
	}
	cur := v.root
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok || m[tok] == nil {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		cur = m[tok]
	}
	return cur, nil
}

// check returns the failures of x against schema; an error means the
// schema itself is broken.
func (v *svValidator) check(schema, x any, path string) (vErrors, error) {
	var r vErrors
	s, ok := schema.(map[string]any)
	if !ok {
		b, isBool := schema.(bool)
		if !isBool {
			return r, fmt.Errorf("%s: a schema must be an object or a boolean, not %T", path, schema)
		}
		if !b {
			r.add(path, "no value is allowed here")
		}
		return r, nil
	}
	for _, k := range svSortedKeys(s) {
		if svAnnotations[k] {
			continue
		}
		kr, err := v.keyword(s, k, x, path)
		if err != nil {
			return r, err
		}
		r.merge(kr)
	}
	return r, nil
}

func (v *svValidator) keyword(s map[string]any, k string, x any, path string) (vErrors, error) {
	var r vErrors
	arg := s[k]
	switch k {
	case "$ref":
		ref, _ := arg.(string)
		sub, err := v.resolve(ref)
		if err != nil {
			return r, err
		}
		return v.check(sub, x, path)
	case "type":
		types, ok := arg.([]any)
		if !ok {
			types = []any{arg}
		}
		for _, t := range types {
			if svHasType(x, t.(string)) {
				return r, nil
			}
		}
		r.add(path, "got %s, want type %s", svTypeOf(x), svShow(arg))
	case "const":
		if reflect.DeepEqual(x, arg) {
			r.evidence++
		} else {
			r.add(path, "got %s, want %s", svShow(x), svShow(arg))
		}
	case "enum":
		for _, e := range arg.([]any) {
			if reflect.DeepEqual(x, e) {
				return r, nil
			}
		}
		r.add(path, "got %s, want one of %s", svShow(x), svShow(arg))
	case "contentEncoding":
		if arg != "base64" {
			return r, fmt.Errorf("%s: contentEncoding %v is not supported", path, arg)
		}
		if str, ok := x.(string); ok {
			if _, err := base64.StdEncoding.DecodeString(str); err != nil {
				r.add(path, "not base64: %v", err)
			}
		}
	case "required":
		if obj, ok := x.(map[string]any); ok {
			for _, name := range arg.([]any) {
				if _, ok := obj[name.(string)]; !ok {
					r.add(path+"/"+name.(string), "the required property %q is missing", name)
				}
			}
		}
	case "properties":
		if obj, ok := x.(map[string]any); ok {
			props := arg.(map[string]any)
			for _, name := range svSortedKeys(obj) {
				if sub, ok := props[name]; ok {
					pr, err := v.check(sub, obj[name], path+"/"+name)
					if err != nil {
						return r, err
					}
					r.merge(pr)
				}
			}
		}
	case "additionalProperties":
		if obj, ok := x.(map[string]any); ok {
			props, _ := s["properties"].(map[string]any)
			for _, name := range svSortedKeys(obj) {
				if _, known := props[name]; known {
					continue
				}
				if arg == false {
					r.add(path+"/"+name, "the property %q is not allowed", name)
					continue
				}
				pr, err := v.check(arg, obj[name], path+"/"+name)
				if err != nil {
					return r, err
				}
				r.merge(pr)
			}
		}
	case "items":
		if arr, ok := x.([]any); ok {
			for i, e := range arr {
				ir, err := v.check(arg, e, path+"/"+strconv.Itoa(i))
				if err != nil {
					return r, err
				}
				r.merge(ir)
			}
		}
	case "anyOf", "oneOf":
		var fails []vErrors
		matched, best := 0, 0
		for _, sub := range arg.([]any) {
			br, err := v.check(sub, x, path)
			if err != nil {
				return r, err
			}
			if len(br.errs) == 0 {
				matched++
				best = max(best, br.evidence)
				continue
			}
			fails = append(fails, br)
		}
		if k == "oneOf" && matched > 1 {
			r.add(path, "matches %d alternatives of oneOf, want 1", matched)
			return r, nil
		}
		if matched > 0 {
			r.evidence = best
			return r, nil
		}
		return svBestFailure(fails), nil
	default:
		return r, fmt.Errorf("%s: the validator does not know the keyword %q", path, k)
	}
	return r, nil
}

// svBestFailure picks, of the alternatives that all failed, the failures
// of the best fits: those with the most evidence, and of those the ones
// with the fewest failures.
func svBestFailure(fails []vErrors) vErrors {
	most, fewest := 0, -1
	for _, f := range fails {
		most = max(most, f.evidence)
	}
	for _, f := range fails {
		if f.evidence == most && (fewest < 0 || len(f.errs) < fewest) {
			fewest = len(f.errs)
		}
	}
	r := vErrors{evidence: most}
	seen := map[string]bool{}
	for _, f := range fails {
		if f.evidence != most || len(f.errs) != fewest {
			continue
		}
		for _, e := range f.errs {
			if !seen[e.Error()] {
				seen[e.Error()] = true
				r.errs = append(r.errs, e)
			}
		}
	}
	return r
}

func svHasType(x any, t string) bool {
	switch t {
	case "null":
		return x == nil
	case "boolean":
		_, ok := x.(bool)
		return ok
	case "string":
		_, ok := x.(string)
		return ok
	case "object":
		_, ok := x.(map[string]any)
		return ok
	case "array":
		_, ok := x.([]any)
		return ok
	case "number", "integer":
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return false
		}
		return t == "number" || f == math.Trunc(f)
	}
	return false
}

func svTypeOf(x any) string {
	switch x := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.Number:
		if svHasType(x, "integer") {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", x)
}

func svShow(x any) string {
	b, _ := json.Marshal(x)
	return string(b)
}

func svSortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
