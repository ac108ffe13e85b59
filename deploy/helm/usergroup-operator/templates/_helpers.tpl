{{/* Chart name, overridable. */}}
{{- define "usergroup-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless the release name has it. */}}
{{- define "usergroup-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "usergroup-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "usergroup-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "usergroup-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "usergroup-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: usergroup-operator
{{- end }}

{{- define "usergroup-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "usergroup-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "usergroup-operator.leaseName" -}}
{{- default (include "usergroup-operator.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "usergroup-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding the default connection's API key: the user's, or the one this chart creates. */}}
{{- define "usergroup-operator.apiKeySecretName" -}}
{{- if .Values.connection.apiKey.existingSecret }}
{{- .Values.connection.apiKey.existingSecret }}
{{- else }}
{{- printf "%s-api-key" (include "usergroup-operator.fullname" .) }}
{{- end }}
{{- end }}

{{/* Refuses combinations the schema cannot express, with a message that says what to change. */}}
{{- define "usergroup-operator.validate" -}}
{{- if and .Values.connection.url (not .Values.connection.apiKey.existingSecret) (not .Values.connection.apiKey.value) }}
{{- fail "connection.url is set but there is no API key: set connection.apiKey.existingSecret (recommended) or connection.apiKey.value" }}
{{- end }}
{{- if and (not .Values.connection.url) (or .Values.connection.apiKey.existingSecret .Values.connection.apiKey.value) }}
{{- fail "connection.apiKey is set but connection.url is empty: set connection.url too" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) (not .Values.sharding.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled=true or sharding.enabled=true (two leaders would both call the service)" }}
{{- end }}
{{- end }}

{{/* What the controller reads and writes that is cluster-scoped, whatever namespaces it manages; each rule says why. */}}
{{- define "usergroup-operator.clusterRules" -}}
# Shared connections and their tenant rules (cluster admins write them; the controller only reads).
- apiGroups: [usergroup.dev]
  resources: [clusterusergroupservices]
  verbs: [get, list, watch]
# Which namespace holds which userGroupId: created before a first call, taken over within a namespace,
# released when adoption is refused. Tenants get no access to these.
- apiGroups: [usergroup.dev]
  resources: [usergroupclaims]
  verbs: [get, list, watch, create, update, delete]
# Namespace labels, for the tenant rules' namespaceSelector.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
{{- if .Values.metrics.auth }}
# /metrics behind authentication and authorization (metrics.auth): a scraper's bearer token is checked with a
# TokenReview, its identity with a SubjectAccessReview (what the built-in system:auth-delegator role grants).
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}
{{- end }}

{{/* What the controller does in a namespace it manages; each rule says why. */}}
{{- define "usergroup-operator.rules" -}}
# Watch the declared groups; never write them (spec, labels and annotations stay the user's / GitOps').
- apiGroups: [usergroup.dev]
  resources: [usergroups]
  verbs: [get, list, watch]
# spec.deletionPolicy Rotate: add and remove the usergroup.dev/rotate-on-delete finalizer, by a merge patch of
# metadata.finalizers alone (RBAC cannot narrow patch to one field; the controller writes no other).
- apiGroups: [usergroup.dev]
  resources: [usergroups]
  verbs: [patch]
# Report observedGeneration and conditions (merge patch of the status subresource only).
- apiGroups: [usergroup.dev]
  resources: [usergroups/status]
  verbs: [patch]
# Per-namespace connections.
- apiGroups: [usergroup.dev]
  resources: [usergroupservices]
  verbs: [get, list, watch]
# Token Secrets: list/watch (label-selected to the operator's own) to notice deletion and edits; get for
# API-key Secrets of UserGroupServices and name conflicts; create/update to store tokens; delete for
# Secrets left behind when spec.tokenSecret.name changes; patch for the rotate-on-delete finalizer.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, patch, delete]
# Events: create a series, patch its count.
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- if .Values.rolloutRestart.enabled }}
# rolloutRestart.enabled: read a spec.rolloutRestartTargets workload (its owner's consent) and patch its pod
# template's annotations, as kubectl rollout restart does.
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, patch]
{{- end }}
{{- if .Values.mountedTokenRefresh.enabled }}
# mountedTokenRefresh.enabled: list a namespace's Pods labelled refresh.usergroup.dev/<UserGroup name> (as metadata)
# and set one annotation on each; the chart's pod-prompt-guard admission policy refuses any other write to a Pod.
- apiGroups: [""]
  resources: [pods]
  verbs: [list, patch]
{{- end }}
{{- end }}

{{/*
The controller's V8 heap in MiB: heapPercent of resources.limits.memory (Mi, Gi, M, G or bytes), or empty when either
is unset (Node then sizes its heap from the cgroup limit itself).
*/}}
{{- define "usergroup-operator.heapMiB" -}}
{{- $limit := toString ((((.Values.resources).limits).memory) | default "") -}}
{{- $pct := int (.Values.heapPercent | default 0) -}}
{{- if and $limit (gt $pct 0) -}}
{{- $mib := 0.0 -}}
{{- if hasSuffix "Gi" $limit -}}{{- $mib = mulf (trimSuffix "Gi" $limit | float64) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}{{- $mib = trimSuffix "Mi" $limit | float64 -}}
{{- else if hasSuffix "G" $limit -}}{{- $mib = divf (mulf (trimSuffix "G" $limit | float64) 1000000000) 1048576 -}}
{{- else if hasSuffix "M" $limit -}}{{- $mib = divf (mulf (trimSuffix "M" $limit | float64) 1000000) 1048576 -}}
{{- else if regexMatch "^[0-9]+$" $limit -}}{{- $mib = divf ($limit | float64) 1048576 -}}
{{- else -}}{{- fail (printf "resources.limits.memory %q: give it in Mi, Gi, M, G or bytes, so that the heap can be sized from it (or set heapPercent: 0)" $limit) -}}
{{- end -}}
{{- div (mulf $mib $pct | int) 100 -}}
{{- end -}}
{{- end -}}
