package k8s

import (
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The Pod's conventions, which the checks rely on.
const (
	installName = "install-gatebridge" // init container: copies the binary
	sandboxName = "sandbox"            // runs `gatebridge agent`
	sidecarName = "gatebridge"         // runs `gatebridge serve`
	binVolume   = "gatebridge-bin"     // the binary, read-only in the sandbox
	mailVolume  = "gatebridge"         // the mailbox, shared
	workVolume  = "workspace"          // the workspace, shared
	servePort   = 7800
	tokenKey    = "token" // the token Secret's key
)

// sidecarCaps are the only capabilities the sidecar keeps: it runs as uid
// 0 to chown session dirs to the sandbox's uid, and nothing more.
var sidecarCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER"}

// problems collects what a check found wrong.
type problems []string

func (p *problems) add(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// checkPodSpec checks the security properties of the sidecar topology's
// pod spec; tokenSecret is the name of the token's Secret.
func checkPodSpec(spec *corev1.PodSpec, tokenSecret string) problems {
	var p problems

	// The pod.
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.add("automountServiceAccountToken must be false: the sandbox gets no API token")
	}
	if isTrue(spec.ShareProcessNamespace) {
		p.add("shareProcessNamespace must not be true: the sandbox would see the sidecar's processes")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		p.add("hostNetwork, hostPID and hostIPC must be false")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		p.add("enableServiceLinks must be false: no Service addresses in the sandbox's environment")
	}
	if len(spec.EphemeralContainers) > 0 {
		p.add("no ephemeral containers expected")
	}
	vols := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		vols[v.Name] = v
		switch {
		case v.EmptyDir != nil:
			if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
				p.add("volume %s: an emptyDir needs a sizeLimit", v.Name)
			}
		case v.Secret != nil, v.PersistentVolumeClaim != nil:
		default:
			p.add("volume %s: only emptyDir, secret and persistentVolumeClaim volumes are expected (no hostPath, no projected token)", v.Name)
		}
	}

	// Every container.
	install := findContainer(spec.InitContainers, installName)
	sandbox := findContainer(spec.Containers, sandboxName)
	sidecar := findContainer(spec.Containers, sidecarName)
	if install == nil || sandbox == nil || sidecar == nil {
		p.add("expected init container %q and containers %q and %q", installName, sandboxName, sidecarName)
		return p
	}
	all := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for i := range all {
		c := &all[i]
		checkContainer(&p, spec, c)
		for _, m := range c.VolumeMounts {
			v := vols[m.Name]
			if v == nil {
				p.add("container %s: mount %s: no volume of that name", c.Name, m.Name)
				continue
			}
			if v.Secret != nil && c.Name != sidecarName {
				p.add("container %s: mounts Secret volume %s: only the sidecar may", c.Name, m.Name)
			}
		}
		if c.Name != sidecarName {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					p.add("container %s: envFrom a Secret: only the sidecar may see secrets", c.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					p.add("container %s: env %s from a Secret: only the sidecar may see secrets", c.Name, e.Name)
				}
			}
		}
	}
	if len(spec.Containers) != 2 || len(spec.InitContainers) != 1 {
		p.add("expected exactly the containers %s and %s and the init container %s", sandboxName, sidecarName, installName)
	}

	// The init container and the sandbox: not root, no capability.
	for _, c := range []*corev1.Container{install, sandbox} {
		sc := c.SecurityContext
		if sc == nil {
			continue // reported by checkContainer
		}
		if !isTrue(effective(sc.RunAsNonRoot, podSC(spec).RunAsNonRoot)) {
			p.add("container %s: runAsNonRoot must be true", c.Name)
		}
		if u := effective(sc.RunAsUser, podSC(spec).RunAsUser); u == nil || *u == 0 {
			p.add("container %s: runAsUser must be set and not 0", c.Name)
		}
		if g := effective(sc.RunAsGroup, podSC(spec).RunAsGroup); g == nil || *g == 0 {
			p.add("container %s: runAsGroup must be set and not 0", c.Name)
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			p.add("container %s: adds capabilities %v: it must keep none", c.Name, sc.Capabilities.Add)
		}
	}

	// The binary: written by the init container, read-only in the sandbox,
	// and what the sandbox runs.
	if m := mountOf(install, binVolume); m == nil || m.ReadOnly {
		p.add("container %s: must mount %s writable to install the binary", installName, binVolume)
	}
	for _, m := range sandbox.VolumeMounts {
		if m.Name == binVolume && !m.ReadOnly {
			p.add("container %s: volume %s must be mounted read-only", sandboxName, binVolume)
		}
	}
	if len(sandbox.Command) == 0 {
		p.add("container %s: no command: its entrypoint must be `gatebridge agent`", sandboxName)
	} else if m := coveringMount(sandbox, sandbox.Command[0]); m == nil || m.Name != binVolume || !m.ReadOnly {
		p.add("container %s: command %s must be in the read-only %s mount", sandboxName, sandbox.Command[0], binVolume)
	}
	sandboxArgv := append(slices.Clone(sandbox.Command), sandbox.Args...)
	if !slices.Contains(sandboxArgv, "agent") {
		p.add("container %s: must run `gatebridge agent`: %q", sandboxName, sandboxArgv)
	}

	// The sidecar: uid 0 with exactly three capabilities.
	if sc := sidecar.SecurityContext; sc != nil && sc.Capabilities != nil {
		var add []string
		for _, c := range sc.Capabilities.Add {
			add = append(add, strings.TrimPrefix(string(c), "CAP_"))
		}
		slices.Sort(add)
		if !slices.Equal(add, sidecarCaps) {
			p.add("container %s: capabilities added must be exactly %v, not %v", sidecarName, sidecarCaps, add)
		}
	}
	sidecarArgv := append(slices.Clone(sidecar.Command), sidecar.Args...)
	if !slices.Contains(sidecarArgv, "serve") {
		p.add("container %s: must run `gatebridge serve`: %q", sidecarName, sidecarArgv)
	}

	// The mailbox: one memory-backed emptyDir at the same path in both, the
	// path the agent and serve are given.
	// serve --attach DIR serves the agent directory DIR/agent.
	dir, _ := flagValue(sandboxArgv, "--dir")
	attach, _ := flagValue(sidecarArgv, "--attach")
	if attach == "" || dir != attach+"/agent" {
		p.add("agent --dir %q must be serve --attach %q followed by /agent", dir, attach)
	}
	for _, c := range []*corev1.Container{sandbox, sidecar} {
		if m := exactMount(c, attach); m == nil || m.Name != mailVolume {
			p.add("container %s: the mailbox %q must be the mount of volume %s", c.Name, attach, mailVolume)
		}
	}
	if v := vols[mailVolume]; v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		p.add("volume %s must be an emptyDir with medium Memory (sizeLimit checked above)", mailVolume)
	}

	// Every volume both mount (the mailbox, the workspace) at the same
	// paths: the design requires identical paths on both sides. (Mounts
	// of a part of a volume, subPath, are checked below.)
	if mountOf(sandbox, workVolume) == nil || mountOf(sidecar, workVolume) == nil {
		p.add("volume %s must be mounted in %s and %s", workVolume, sandboxName, sidecarName)
	}
	for name := range vols {
		a, b := mountPaths(sandbox, name), mountPaths(sidecar, name)
		if len(a) > 0 && len(b) > 0 && !slices.Equal(a, b) {
			p.add("volume %s: mounted at %v in %s but at %v in %s: the paths must be the same", name, a, sandboxName, b, sidecarName)
		}
	}

	checkProtectedPaths(&p, sandbox, sidecar, sidecarArgv)

	// The token and the TLS files: read-only mounts of Secrets, readable by
	// their owner only.
	secretFile := func(flag, wantSecret, wantKey string) {
		file, ok := flagValue(sidecarArgv, flag)
		if !ok {
			p.add("container %s: no %s", sidecarName, flag)
			return
		}
		m := coveringMount(sidecar, file)
		if m == nil {
			p.add("container %s: %s %s: no volume mounted there", sidecarName, flag, file)
			return
		}
		if !m.ReadOnly {
			p.add("container %s: %s %s: the mount must be read-only", sidecarName, flag, file)
		}
		v := vols[m.Name]
		if v == nil || v.Secret == nil {
			p.add("container %s: %s %s: must be a Secret volume", sidecarName, flag, file)
			return
		}
		if wantSecret != "" && v.Secret.SecretName != wantSecret {
			p.add("container %s: %s %s: from Secret %q, not the token Secret %q", sidecarName, flag, file, v.Secret.SecretName, wantSecret)
		}
		if wantSecret == "" && v.Secret.SecretName == tokenSecret {
			p.add("container %s: %s %s: from the token Secret", sidecarName, flag, file)
		}
		key := m.SubPath
		if key == "" {
			key, _ = strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		}
		if key != wantKey {
			p.add("container %s: %s %s: Secret key %q, want %q", sidecarName, flag, file, key, wantKey)
		}
		if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 || len(v.Secret.Items) > 0 {
			p.add("volume %s: defaultMode must be 0400 (and no items)", m.Name)
		}
	}
	secretFile("--token-file", tokenSecret, tokenKey)
	secretFile("--tls-cert", "", corev1.TLSCertKey)
	secretFile("--tls-key", "", corev1.TLSPrivateKeyKey)

	// The port: serve listens on 7800, declared and probed.
	if listen, _ := flagValue(sidecarArgv, "--listen"); listen == "" {
		p.add("container %s: no --listen", sidecarName)
	} else if _, port, err := net.SplitHostPort(listen); err != nil || port != strconv.Itoa(servePort) {
		p.add("container %s: --listen %s: want port %d", sidecarName, listen, servePort)
	}
	if len(sidecar.Ports) != 1 || sidecar.Ports[0].ContainerPort != servePort || sidecar.Ports[0].Name != "gatebridge" ||
		(sidecar.Ports[0].Protocol != "" && sidecar.Ports[0].Protocol != corev1.ProtocolTCP) {
		p.add("container %s: ports must be exactly TCP %d named gatebridge", sidecarName, servePort)
	}
	if rp := sidecar.ReadinessProbe; rp == nil || rp.TCPSocket == nil || !isServePort(rp.TCPSocket.Port) {
		p.add("container %s: needs a tcpSocket readiness probe on %d", sidecarName, servePort)
	}
	for _, c := range spec.Containers {
		if c.Name != sidecarName && len(c.Ports) > 0 {
			p.add("container %s: declares ports: only the sidecar serves", c.Name)
		}
	}
	return p
}

// Environment variables of the sidecar that set gatebridge's config keys
// sandbox.protected_paths and sandbox.attach.read_only_paths.
const (
	envProtected = "GATEBRIDGE_SANDBOX_PROTECTED_PATHS"
	envReadOnly  = "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS"
)

// checkProtectedPaths: gatebridge cannot see the sandbox's mounts, so with
// a writable workspace `serve --attach` starts only when the config
// declares where the sandbox mounts every protected path read-only
// (sandbox.attach.read_only_paths, absolute), and opens a sandbox only on
// a workspace so covered. The manifests make that declaration true for
// the workspace (the sandbox's mount of the workspace volume): each
// declared path is a read-only mount in the sandbox of what the sidecar
// sees at that path (the same volume, the matching subPath), nothing
// writable is mounted inside it, and each directory between it and the
// whole volume's mount is a mount point too (a directory holding a mount
// can be renamed, and the mount goes with it: the sandbox would then make
// a new one at the old name).
func checkProtectedPaths(p *problems, sandbox, sidecar *corev1.Container, sidecarArgv []string) {
	ws := mountOf(sandbox, workVolume)
	if ws == nil {
		return // reported above
	}
	wsPath := path.Clean(ws.MountPath)
	if slices.Contains(sidecarArgv, "--attach-readonly-workspace") {
		if !ws.ReadOnly {
			p.add("container %s: the sidecar says --attach-readonly-workspace, but the workspace is mounted writable", sandboxName)
		}
		return
	}
	protected, ok := envList(sidecar, envProtected)
	if !ok {
		var err error
		if protected, err = defaultProtectedPaths(); err != nil {
			p.add("the default sandbox.protected_paths: %v", err)
			return
		}
	}
	declared, _ := envList(sidecar, envReadOnly)
	for _, pp := range protected {
		if !covered(path.Join(wsPath, pp), declared) {
			p.add("container %s: protected path %s of the workspace %s (sandbox.protected_paths) is not covered by %s (sandbox.attach.read_only_paths %q): serve --attach would refuse to start, or that workspace",
				sidecarName, pp, wsPath, envReadOnly, declared)
		}
	}
	for _, d := range declared {
		if !path.IsAbs(d) {
			p.add("container %s: %s: %q is not an absolute path", sidecarName, envReadOnly, d)
			continue
		}
		at := path.Clean(d)
		// What the sidecar sees there: the sandbox must mount the same.
		sc := coveringMount(sidecar, at)
		if sc == nil || sc.SubPath != "" {
			p.add("container %s: declared read-only path %s: the sidecar has no whole-volume mount holding it", sidecarName, at)
			continue
		}
		wantSub := path.Join(sc.SubPath, strings.TrimPrefix(strings.TrimPrefix(at, path.Clean(sc.MountPath)), "/"))
		m := exactMount(sandbox, at)
		switch {
		case m == nil:
			p.add("container %s: declared read-only path %s: no mount at %s (want a readOnly subPath %s of volume %s)", sandboxName, at, at, wantSub, sc.Name)
			continue
		case m.Name != sc.Name || path.Clean(m.SubPath) != wantSub || m.SubPathExpr != "":
			p.add("container %s: declared read-only path %s: the mount there must be volume %s subPath %s (what the sidecar sees there), not volume %s subPath %q",
				sandboxName, at, sc.Name, wantSub, m.Name, m.SubPath)
		case !m.ReadOnly:
			p.add("container %s: declared read-only path %s: the mount there must be readOnly", sandboxName, at)
		}
		for _, o := range sandbox.VolumeMounts {
			if mp := path.Clean(o.MountPath); strings.HasPrefix(mp, at+"/") && !o.ReadOnly {
				p.add("container %s: %s is mounted writable inside the read-only %s", sandboxName, mp, at)
			}
		}
		base := coveringMountWhole(sandbox, at)
		for dir := path.Dir(at); base != "" && strings.HasPrefix(dir, base+"/"); dir = path.Dir(dir) {
			if exactMount(sandbox, dir) == nil {
				p.add("container %s: declared read-only path %s: %s must be a mount point too, or the sandbox renames it and makes a new %s", sandboxName, at, dir, path.Base(at))
			}
		}
	}
}

// coveringMountWhole is the mount path of c's deepest whole-volume mount
// holding p ("" if none).
func coveringMountWhole(c *corev1.Container, p string) string {
	best := ""
	for _, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if m.SubPath == "" && strings.HasPrefix(p, mp+"/") && len(mp) > len(best) {
			best = mp
		}
	}
	return best
}

// covered reports whether the absolute path p is a declared path or
// under one.
func covered(p string, declared []string) bool {
	for _, d := range declared {
		if !path.IsAbs(d) {
			continue
		}
		d = path.Clean(d)
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// envList is the value of c's environment variable name, split at commas
// as gatebridge reads a list from one; ok reports it is set.
func envList(c *corev1.Container, name string) (list []string, ok bool) {
	for _, e := range c.Env {
		if e.Name == name {
			for _, v := range strings.Split(e.Value, ",") {
				if v = strings.TrimSpace(v); v != "" {
					list = append(list, v)
				}
			}
			return list, e.Value != ""
		}
	}
	return nil, false
}

// defaultProtectedPaths is sandbox.protected_paths in gatebridge's
// documented config (every key with its default).
var defaultProtectedPaths = sync.OnceValues(func() ([]string, error) {
	const file = "../../configs/gatebridge.yaml"
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Sandbox struct {
			ProtectedPaths []string `json:"protected_paths"`
		} `json:"sandbox"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if cfg.Sandbox.ProtectedPaths == nil {
		return nil, fmt.Errorf("%s: no sandbox.protected_paths", file)
	}
	return cfg.Sandbox.ProtectedPaths, nil
})

// checkContainer checks what holds for every container.
func checkContainer(p *problems, spec *corev1.PodSpec, c *corev1.Container) {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Limits[r]; !ok || q.IsZero() {
			p.add("container %s: no %s limit", c.Name, r)
		}
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			p.add("container %s: no %s request", c.Name, r)
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		p.add("container %s: no securityContext", c.Name)
		return
	}
	if isTrue(sc.Privileged) {
		p.add("container %s: privileged", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p.add("container %s: allowPrivilegeEscalation must be false", c.Name)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		p.add("container %s: readOnlyRootFilesystem must be true", c.Name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		p.add("container %s: capabilities must drop ALL", c.Name)
	}
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		p.add("container %s: procMount must be Default", c.Name)
	}
	if s := effective(sc.SeccompProfile, podSC(spec).SeccompProfile); s == nil || s.Type != corev1.SeccompProfileTypeRuntimeDefault {
		p.add("container %s: seccompProfile must be RuntimeDefault", c.Name)
	}
}

// checkNetworkPolicy checks that policy selects a pod with podLabels,
// denies all its egress, and admits ingress on 7800 from selected pods
// only.
func checkNetworkPolicy(policy *networkingv1.NetworkPolicy, podLabels map[string]string) problems {
	var p problems
	sel, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	if err != nil {
		p.add("podSelector: %v", err)
	} else if sel.Empty() || !sel.Matches(labels.Set(podLabels)) {
		p.add("podSelector %v must select the pod (labels %v) and not every pod", sel, podLabels)
	}
	return append(p, checkPolicyRules(&policy.Spec)...)
}

// checkPolicyRules checks a NetworkPolicy's types and rules, whoever
// selects the pods: all egress denied, ingress on 7800 from selected pods
// only.
func checkPolicyRules(spec *networkingv1.NetworkPolicySpec) problems {
	var p problems
	if !slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress) ||
		!slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		p.add("policyTypes must hold Ingress and Egress (without Egress, egress is not restricted): %v", spec.PolicyTypes)
	}
	if len(spec.Egress) > 0 {
		p.add("egress must be empty (all denied): %d rules", len(spec.Egress))
	}
	if len(spec.Ingress) == 0 {
		p.add("no ingress rule: the runtime could not reach port %d", servePort)
	}
	for i, r := range spec.Ingress {
		if len(r.From) == 0 {
			p.add("ingress %d: no from: it would admit every source", i)
		}
		for j, peer := range r.From {
			if peer.IPBlock != nil {
				p.add("ingress %d from %d: ipBlock: admit the runtime's pods by label", i, j)
			}
			if peer.PodSelector == nil || (len(peer.PodSelector.MatchLabels) == 0 && len(peer.PodSelector.MatchExpressions) == 0) {
				p.add("ingress %d from %d: needs a non-empty podSelector (the runtime's pods)", i, j)
			}
		}
		if len(r.Ports) == 0 {
			p.add("ingress %d: no ports: it would admit every port", i)
		}
		for _, port := range r.Ports {
			if port.Port == nil || !isServePort(*port.Port) || port.EndPort != nil ||
				(port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP) {
				p.add("ingress %d: ports must be TCP %d only", i, servePort)
			}
		}
	}
	return p
}

// The RuntimeClass the SandboxTemplate's pods run with, and gVisor's
// mount hints (pod annotations, read by runsc: runsc/boot/mount_hints.go
// in google/gvisor).
const (
	gvisorRuntimeClass = "gvisor"
	gvisorMountHint    = "dev.gvisor.spec.mount." // + VOLUME.share|type|options
)

// checkSandboxTemplate checks what agent-sandbox's SandboxTemplate adds to
// the pod (whose spec checkPodSpec checks): gVisor, the mailbox one
// volume inside it, the NetworkPolicy that agent-sandbox's controller makes
// for the template's pods, and what a SandboxClaim may change.
func checkSandboxTemplate(t *agentSandboxTemplate) problems {
	var p problems
	spec := &t.Spec.PodTemplate.Spec

	// gVisor: every container of the pod in one gVisor sandbox.
	if rc := spec.RuntimeClassName; rc == nil || *rc != gvisorRuntimeClass {
		p.add("runtimeClassName must be %s: the sandbox's commands must meet gVisor's kernel, not the node's", gvisorRuntimeClass)
	}
	// The mailbox, one tmpfs inside gVisor for the sidecar and the
	// sandbox alike: without the hint gVisor mounts the volume in each
	// container apart, and a FIFO (wake, stdin, the lease) or an inotify
	// watch of one does not see the other's side.
	ann := t.Spec.PodTemplate.Metadata.Annotations
	if ann[gvisorMountHint+mailVolume+".share"] != "pod" || ann[gvisorMountHint+mailVolume+".type"] != "tmpfs" {
		p.add("pod annotations: %s%s.share must be pod and .type tmpfs: the mailbox must be one volume inside gVisor for both containers", gvisorMountHint, mailVolume)
	}
	// A hint covers a volume's whole mounts only (the shim matches the
	// node's path of the volume, not of a subPath): a subPath mount of a
	// hinted volume would show the node's directory, and the whole mount
	// gVisor's tmpfs. A protected path mounted so would not be what the
	// sidecar sees.
	for k := range ann {
		rest, ok := strings.CutPrefix(k, gvisorMountHint)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.Name == name && (m.SubPath != "" || m.SubPathExpr != "") {
					p.add("pod annotation %s: volume %s has a subPath mount (container %s, %s), which the hint does not cover", k, name, c.Name, m.MountPath)
				}
			}
		}
	}

	// The controller's NetworkPolicy for the template's pods.
	switch t.Spec.NetworkPolicyManagement {
	case "", "Managed":
	default:
		p.add("networkPolicyManagement %q: must be Managed, so that the controller enforces networkPolicy on every pod of the template", t.Spec.NetworkPolicyManagement)
	}
	if t.Spec.NetworkPolicy == nil {
		p.add("networkPolicy must be set: without it the controller's default allows egress to the public Internet, and NetworkPolicies add up")
	} else {
		// As the controller makes it: both policy types, these rules.
		np := networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     t.Spec.NetworkPolicy.Ingress,
			Egress:      t.Spec.NetworkPolicy.Egress,
		}
		for _, s := range checkPolicyRules(&np) {
			p.add("networkPolicy: %s", s)
		}
	}

	// What a claim may change: nothing.
	if v := t.Spec.EnvVarsInjectionPolicy; v != "" && v != "Disallowed" {
		p.add("envVarsInjectionPolicy %q: must be Disallowed: a claim could set the sidecar's config or the sandbox's environment", v)
	}
	if v := t.Spec.VolumeClaimTemplatesPolicy; v != "" && v != "Disallowed" {
		p.add("volumeClaimTemplatesPolicy %q: must be Disallowed: a claim could add volumes to the pod", v)
	}
	return p
}

// checkWarmPool checks the pool: it makes pods from the template, keeps
// some ready, and replaces the unclaimed ones when the template changes.
func checkWarmPool(pool *agentWarmPool, template *agentSandboxTemplate) problems {
	var p problems
	if got := pool.Spec.SandboxTemplateRef.Name; got != template.Name {
		p.add("SandboxWarmPool %s: sandboxTemplateRef %q, want the template %q", pool.Name, got, template.Name)
	}
	if r := pool.Spec.Replicas; r == nil || *r < 1 {
		p.add("SandboxWarmPool %s: replicas must be set and at least 1", pool.Name)
	}
	if u := pool.Spec.UpdateStrategy; u == nil || u.Type != "Recreate" {
		p.add("SandboxWarmPool %s: updateStrategy.type must be Recreate: a changed template (a security fix) must replace the unclaimed pods at once", pool.Name)
	}
	return p
}

// checkClaim checks the example claim: it takes a pod from the pool as it
// is.
func checkClaim(claim *agentClaim, pool *agentWarmPool) problems {
	var p problems
	if got := claim.Spec.WarmPoolRef.Name; got != pool.Name {
		p.add("SandboxClaim %s: warmPoolRef %q, want the pool %q", claim.Name, got, pool.Name)
	}
	if len(claim.Spec.Env) > 0 || len(claim.Spec.VolumeClaimTemplates) > 0 {
		p.add("SandboxClaim %s: no env and no volumeClaimTemplates: the pod is the template's", claim.Name)
	}
	return p
}

// checkTokenSecret checks the token Secret's template: one key, holding a
// placeholder (a real token is never committed).
func checkTokenSecret(s *corev1.Secret) problems {
	var p problems
	if s.Type != corev1.SecretTypeOpaque {
		p.add("Secret %s: type %q, want Opaque", s.Name, s.Type)
	}
	if len(s.Data) != 0 || len(s.StringData) != 1 {
		p.add("Secret %s: want stringData with the one key %q", s.Name, tokenKey)
	}
	if v, ok := s.StringData[tokenKey]; !ok || !strings.HasPrefix(v, "REPLACE_") {
		p.add("Secret %s: %s must be a REPLACE_ placeholder in the template, not a token", s.Name, tokenKey)
	}
	return p
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// mountOf is c's first mount of volume, or nil.
func mountOf(c *corev1.Container, volume string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// mountPaths are the paths where c mounts the whole of volume (not a
// subPath of it).
func mountPaths(c *corev1.Container, volume string) []string {
	var ps []string
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.SubPath == "" && m.SubPathExpr == "" {
			ps = append(ps, path.Clean(m.MountPath))
		}
	}
	slices.Sort(ps)
	return ps
}

// exactMount is the mount at p.
func exactMount(c *corev1.Container, p string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if path.Clean(c.VolumeMounts[i].MountPath) == path.Clean(p) {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// coveringMount is the deepest mount holding file p.
func coveringMount(c *corev1.Container, p string) *corev1.VolumeMount {
	p = path.Clean(p)
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := path.Clean(m.MountPath)
		if (p == mp || strings.HasPrefix(p, mp+"/")) && (best == nil || len(mp) > len(path.Clean(best.MountPath))) {
			best = m
		}
	}
	return best
}

// flagValue is the value of --flag V or --flag=V in argv.
func flagValue(argv []string, flag string) (string, bool) {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1], true
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func isServePort(p intstr.IntOrString) bool {
	return (p.Type == intstr.Int && p.IntVal == servePort) || (p.Type == intstr.String && p.StrVal == "gatebridge")
}

func isTrue(b *bool) bool { return b != nil && *b }

// effective is the container's setting, else the pod's.
func effective[T any](container, pod *T) *T {
	if container != nil {
		return container
	}
	return pod
}

func podSC(spec *corev1.PodSpec) *corev1.PodSecurityContext {
	if spec.SecurityContext == nil {
		return &corev1.PodSecurityContext{}
	}
	return spec.SecurityContext
}
