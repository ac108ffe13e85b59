// Command argocd-lua runs deploy/argocd's resource customizations through Argo CD's own code, so the
// tests judge the scripts by the engine that runs them in production, not by a stand-in.
//
//	argocd-lua <argocd-cm.yaml>
//
// The ConfigMap is loaded by Argo CD's settings manager (util/settings, over a fake clientset that holds
// only that ConfigMap), exactly as the application controller and the API server read resource
// customizations. Requests arrive on stdin, one JSON object per line; each gets one JSON line back:
//
//	{"op":"health","object":{…}}
//	    the application controller's path: gitops-engine health.GetResourceHealth with
//	    lua.ResourceHealthOverrides(overrides) → {"health":{"status","message"},"error"}
//	{"op":"actions","object":{…}}
//	    the API server's ListResourceActions: GetResourceActionDiscovery + ExecuteResourceActionDiscovery
//	    → {"actions":[{"name","disabled","displayName","iconClass"}],"error"}
//	{"op":"run","object":{…},"action":"rotate"}
//	    the API server's RunResourceActionV2: GetResourceAction, ExecuteResourceAction, then for a patch
//	    operation the JSON merge patch of live → returned object (jsonpatch.CreateMergePatch), which it
//	    sends as application/merge-patch+json (nothing at all when the patch is {})
//	    → {"results":[{"operation","patch","object"}],"unixBefore","unixAfter","error"}
//	{"op":"script","object":{…},"script":"…"}
//	    any script in the sandbox custom scripts get (VM.ExecuteHealthLua, standard libraries off), to
//	    probe that sandbox; the script returns {status=…, message=…} → {"health":…,"error"}
//
// unixBefore/unixAfter bracket the action's run: os.date has one-second resolution and Argo CD's os
// library reads the real clock, so a test that depends on the second checks both.
//
// Two more subcommands run Argo CD's diff against a real API server: see diff.go.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/health"
	jsonpatch "github.com/evanphx/json-patch"
	log "github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

type request struct {
	Op     string          `json:"op"`
	Object json.RawMessage `json:"object"`
	Action string          `json:"action,omitempty"`
	Script string          `json:"script,omitempty"`
}

type action struct {
	Name        string `json:"name"`
	Disabled    bool   `json:"disabled"`
	DisplayName string `json:"displayName,omitempty"`
	IconClass   string `json:"iconClass,omitempty"`
}

type impacted struct {
	Operation string          `json:"operation"`
	Patch     json.RawMessage `json:"patch,omitempty"`
	Object    map[string]any  `json:"object"`
}

type response struct {
	Health     *health.HealthStatus `json:"health,omitempty"`
	Actions    []action             `json:"actions,omitempty"`
	Results    []impacted           `json:"results,omitempty"`
	UnixBefore int64                `json:"unixBefore,omitempty"`
	UnixAfter  int64                `json:"unixAfter,omitempty"`
	Error      string               `json:"error,omitempty"`
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "target" || os.Args[1] == "diff") {
		log.SetLevel(log.WarnLevel)
		run := map[string]func([]string) error{"target": targetCommand, "diff": diffCommand}[os.Args[1]]
		if err := run(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "argocd-lua %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-lua <argocd-cm.yaml>  (requests on stdin, one JSON object per line)")
		os.Exit(2)
	}
	// The settings manager logs its informers' progress at info level: not an answer, so not on stdout.
	log.SetLevel(log.WarnLevel)
	overrides, err := loadOverrides(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "argocd-lua: %v\n", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if err := out.Encode(handle(overrides, in.Bytes())); err != nil {
			fmt.Fprintf(os.Stderr, "argocd-lua: writing a response: %v\n", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "argocd-lua: reading requests: %v\n", err)
		os.Exit(1)
	}
}

// loadOverrides reads the resource customizations the way Argo CD does: from the argocd-cm ConfigMap,
// through SettingsManager.GetResourceOverrides (which also adds its default status-ignoring override).
func loadOverrides(file string) (map[string]v1alpha1.ResourceOverride, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
		return nil, fmt.Errorf("%s is not a ConfigMap: %w", file, err)
	}
	if cm.Name != "argocd-cm" || cm.Namespace == "" {
		return nil, fmt.Errorf("%s: expected the argocd-cm ConfigMap with a namespace, got %q in %q", file, cm.Name, cm.Namespace)
	}
	mgr := settings.NewSettingsManager(context.Background(), fake.NewClientset(&cm), cm.Namespace)
	return mgr.GetResourceOverrides()
}

func handle(overrides map[string]v1alpha1.ResourceOverride, line []byte) response {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{Error: "bad request: " + err.Error()}
	}
	// The dynamic client's decoding (what Argo CD's kubectl.GetResource and its cluster cache do):
	// integers become int64, other numbers float64.
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object); err != nil {
		return response{Error: "bad object: " + err.Error()}
	}
	vm := lua.VM{ResourceOverrides: overrides}
	switch req.Op {
	case "health":
		hs, err := health.GetResourceHealth(obj, lua.ResourceHealthOverrides(overrides))
		return response{Health: hs, Error: errorText(err)}
	case "actions":
		return discover(vm, obj)
	case "run":
		return run(vm, obj, req.Action)
	case "script":
		hs, err := lua.VM{}.ExecuteHealthLua(obj, req.Script)
		return response{Health: hs, Error: errorText(err)}
	default:
		return response{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
}

func discover(vm lua.VM, obj *unstructured.Unstructured) response {
	scripts, err := vm.GetResourceActionDiscovery(obj)
	if err != nil {
		return response{Error: "error getting Lua discovery script: " + err.Error()}
	}
	if len(scripts) == 0 {
		return response{Actions: []action{}}
	}
	found, err := vm.ExecuteResourceActionDiscovery(obj, scripts)
	if err != nil {
		return response{Error: "error executing Lua discovery script: " + err.Error()}
	}
	actions := make([]action, 0, len(found))
	for _, a := range found {
		actions = append(actions, action{Name: a.Name, Disabled: a.Disabled, DisplayName: a.DisplayName, IconClass: a.IconClass})
	}
	return response{Actions: actions}
}

func run(vm lua.VM, live *unstructured.Unstructured, name string) response {
	liveBytes, err := json.Marshal(live)
	if err != nil {
		return response{Error: "error marshaling live object: " + err.Error()}
	}
	definition, err := vm.GetResourceAction(live, name)
	if err != nil {
		return response{Error: "error getting Lua resource action: " + err.Error()}
	}
	res := response{UnixBefore: time.Now().Unix()}
	objects, err := vm.ExecuteResourceAction(live, definition.ActionLua, nil)
	res.UnixAfter = time.Now().Unix()
	if err != nil {
		res.Error = "error executing Lua resource action: " + err.Error()
		return res
	}
	for _, o := range objects {
		newBytes, err := json.Marshal(o.UnstructuredObj)
		if err != nil {
			res.Error = "error marshaling new object: " + err.Error()
			return res
		}
		out := impacted{Operation: string(o.K8SOperation), Object: o.UnstructuredObj.Object}
		if o.K8SOperation == lua.PatchOperation {
			patch, err := jsonpatch.CreateMergePatch(liveBytes, newBytes)
			if err != nil {
				res.Error = "error calculating merge patch: " + err.Error()
				return res
			}
			out.Patch = patch
		}
		res.Results = append(res.Results, out)
	}
	if res.Results == nil {
		res.Results = []impacted{}
	}
	return res
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
