package main

// The application controller's comparison of one Git manifest with the cluster, through Argo CD's own code
// against a real API server, for the tests' "no diff loop" claims:
//
//	argocd-lua target <app> <namespace> <manifest.yaml>
//	    the manifest as Argo CD applies it: with its tracking annotation (ResourceTracking.SetAppInstance,
//	    annotation tracking, Argo CD 3's default), as JSON on stdout
//	argocd-lua diff <argocd-cm.yaml> <kubeconfig> <app> <namespace> <manifest.yaml>
//	    CompareAppState's path for that manifest, default client-side diff → one JSON line:
//	    {"modified","cachedApiVersion","liveApiVersion","liveResourceVersion","normalizedLive","predictedLive","error"}
//
// The diff path, step by step as controller/state.go runs it: the target gets its tracking annotation
// (GetRepoObjs); gitops-engine's cluster cache, synced over the namespace, holds the live object as its watch
// delivers it (the API server's preferred version) and GetManagedLiveObjs hands it over converted to the
// target's group/version (KubectlCmd.ConvertToVersion, or, when the scheme does not know the kind as for every
// custom resource, a GET in the target's version); sync.Reconcile pairs target and live; argodiff.StateDiffs,
// built as CompareAppState builds it (the ignore-differences and overrides of argocd-cm, which include the
// default status ignore, tracking, no diff cache, the cluster's GVK parser, manager argocd-controller), diffs them.
// Server-side diff and server-side apply are off, as they are for an Application without ServerSideApply=true
// (from v3.6 on, an Application that syncs with server-side apply is also diffed server-side: shouldUseServerSideDiff).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	clustercache "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/cache"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync"
	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Argo CD 3's defaults: tracking by annotation, the instance label key, no installation ID.
const (
	trackingMethod = v1alpha1.TrackingMethodAnnotation
	appLabelKey    = common.LabelKeyAppInstance
	installationID = ""
)

type diffAnswer struct {
	Modified            bool           `json:"modified"`
	CachedAPIVersion    string         `json:"cachedApiVersion,omitempty"`
	LiveAPIVersion      string         `json:"liveApiVersion,omitempty"`
	LiveResourceVersion string         `json:"liveResourceVersion,omitempty"`
	NormalizedLive      map[string]any `json:"normalizedLive,omitempty"`
	PredictedLive       map[string]any `json:"predictedLive,omitempty"`
	Error               string         `json:"error,omitempty"`
}

// trackedTarget reads one manifest and adds what GetRepoObjs adds before anything is compared or applied.
func trackedTarget(app, namespace, file string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	target := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &target.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := argo.NewResourceTracking().SetAppInstance(target, appLabelKey, app, namespace, trackingMethod, installationID); err != nil {
		return nil, err
	}
	return target, nil
}

func targetCommand(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: argocd-lua target <app> <namespace> <manifest.yaml>")
	}
	target, err := trackedTarget(args[0], args[1], args[2])
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(target.Object)
}

func diffCommand(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("usage: argocd-lua diff <argocd-cm.yaml> <kubeconfig> <app> <namespace> <manifest.yaml>")
	}
	overrides, err := loadOverrides(args[0])
	if err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", args[1])
	if err != nil {
		return err
	}
	app, namespace := args[2], args[3]
	target, err := trackedTarget(app, namespace, args[4])
	if err != nil {
		return err
	}
	answer := compare(config, overrides, app, namespace, target)
	return json.NewEncoder(os.Stdout).Encode(answer)
}

func compare(restConfig *rest.Config, overrides map[string]v1alpha1.ResourceOverride, app, namespace string, target *unstructured.Unstructured) diffAnswer {
	tracking := argo.NewResourceTracking()
	// What the controller's live state cache does (controller/cache/cache.go): every resource gets its
	// application's name as info, and the manifests of tracked resources are kept.
	cache := clustercache.NewClusterCache(restConfig,
		clustercache.SetNamespaces([]string{namespace}),
		clustercache.SetClusterResources(false),
		clustercache.SetPopulateResourceInfoHandler(func(un *unstructured.Unstructured, _ bool) (any, bool) {
			name := tracking.GetAppName(un, appLabelKey, trackingMethod, installationID)
			return name, name != ""
		}),
	)
	defer cache.Invalidate()
	if err := cache.EnsureSynced(); err != nil {
		return diffAnswer{Error: "syncing the cluster cache: " + err.Error()}
	}
	targets := []*unstructured.Unstructured{target}
	// The version the cache's watch delivers the object in, before GetManagedLiveObjs converts it.
	cachedAPIVersion := ""
	if cached, ok := cache.FindResources(namespace)[kube.GetResourceKey(target)]; ok {
		cachedAPIVersion = cached.Ref.APIVersion
	}
	lives, err := cache.GetManagedLiveObjs(targets, func(r *clustercache.Resource) bool {
		name, _ := r.Info.(string)
		return name == app
	})
	if err != nil {
		return diffAnswer{Error: "getting the live objects: " + err.Error()}
	}
	reconciliation := sync.Reconcile(targets, lives, namespace, cache)

	defaults := normalizers.IgnoreNormalizerOpts{JQExecutionTimeout: normalizers.DefaultJQExecutionTimeout}
	diffConfig, err := argodiff.NewDiffConfigBuilder().
		WithDiffSettings([]v1alpha1.ResourceIgnoreDifferences{}, overrides, false, defaults).
		WithTracking(appLabelKey, string(trackingMethod)).
		WithNoCache().
		WithGVKParser(cache.GetGVKParser()).
		WithManager(common.ArgoCDSSAManager).
		WithServerSideDiff(false).
		Build()
	if err != nil {
		return diffAnswer{Error: "building the diff config: " + err.Error()}
	}
	results, err := argodiff.StateDiffs(context.Background(), reconciliation.Live, reconciliation.Target, diffConfig)
	if err != nil {
		return diffAnswer{Error: err.Error()}
	}
	answer := diffAnswer{Modified: results.Modified, CachedAPIVersion: cachedAPIVersion}
	for i, live := range reconciliation.Live {
		if reconciliation.Target[i] != target {
			continue
		}
		if live != nil {
			answer.LiveAPIVersion = live.GetAPIVersion()
			answer.LiveResourceVersion = live.GetResourceVersion()
		}
		d := results.Diffs[i]
		if err := unmarshalIfAny(d.NormalizedLive, &answer.NormalizedLive); err != nil {
			return diffAnswer{Error: err.Error()}
		}
		if err := unmarshalIfAny(d.PredictedLive, &answer.PredictedLive); err != nil {
			return diffAnswer{Error: err.Error()}
		}
	}
	return answer
}

func unmarshalIfAny(raw []byte, into *map[string]any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, into)
}
