{{/* RBAC rules, as lists of rules (rbac.yaml puts them in Roles and the ClusterRole). */}}

{{- define "weft.rules.workflows" -}}
# The controller watches Workflows and patches its finalizer on; the
# admin API gets, lists and watches them, creates them (CreateExecution)
# and patches them (AbortExecution, ApproveGate); CronWorkflows create
# them and delete past runs beyond their history limits.
- apiGroups: [weft.dev]
  resources: [workflows]
  verbs: [get, list, watch, create, patch, delete]
# Status is written as a merge patch, only what changed.
- apiGroups: [weft.dev]
  resources: [workflows/status]
  verbs: [patch]
# A Workflow that names a WorkflowTemplate reads it once, when it starts.
- apiGroups: [weft.dev]
  resources: [workflowtemplates]
  verbs: [get]
# CronWorkflows are watched and their status written; the Workflows they
# launched are deleted beyond the history limits.
- apiGroups: [weft.dev]
  resources: [cronworkflows]
  verbs: [list, watch]
- apiGroups: [weft.dev]
  resources: [cronworkflows/status]
  verbs: [patch]
# The pod plugin's children: watched. They are written and deleted as the
# plugin's ServiceAccount weft-plugin-pod (plugin-rbac.yaml).
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
# The task output cache (TaskCaches weft-cache-<task type> in the
# Workflows' namespaces): watched, created and merge-patched (entries
# added, expired ones dropped).
- apiGroups: [weft.dev]
  resources: [taskcaches]
  verbs: [list, watch, create, patch]
# Mutexes, semaphores and parallelism limits (docs/synchronization.md):
# a Lock per lock in the Workflows' namespaces, holders and waiters in
# the object; watched, created and replaced (optimistic concurrency).
- apiGroups: [weft.dev]
  resources: [locks]
  verbs: [list, watch, get, create, update]
# A Namespace's own parallelism limit (its weft.dev/parallelism
# annotation, read by name, kept 10 s).
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
# A semaphore's limit kept in a ConfigMap (configMapKeyRef, as Argo's)
# is read only where the namespace grants it (a Role with get on that
# ConfigMap, docs/synchronization.md): no ConfigMap cluster-wide.
# A namespace's own artifact repository (docs/artifacts.md): that one
# ConfigMap, read by name, never listed; the namespace opts in by creating
# it (labelled), and grants the Secrets it names itself.
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [weft-artifact-repository]
  verbs: [get]
# core/v1 Events on Workflows and plugin ConfigMaps (created, never updated).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/*
The kinds of the first-party task plugins, as (apiGroup, resources)
pairs per plugin: plugins/NAME/weft-plugin.yaml `resources`, as `weft plugin
rbac` renders them (tests/deploy.rs compares). The pod plugin's always.
*/}}
{{- define "weft.pluginKindRules" -}}
{{- $kinds := dict "pod" (list (dict "apiGroups" (list "") "resources" (list "pods"))) -}}
{{- if .Values.pluginKinds.spark -}}
{{- $_ := set $kinds "spark" (list (dict "apiGroups" (list "sparkoperator.k8s.io") "resources" (list "sparkapplications"))) -}}
{{- end -}}
{{- if .Values.pluginKinds.k8sResource -}}
{{- $_ := set $kinds "k8s-resource" (list
  (dict "apiGroups" (list "batch") "resources" (list "jobs"))
  (dict "apiGroups" (list "kubeflow.org") "resources" (list "pytorchjobs" "tfjobs"))
  (dict "apiGroups" (list "ray.io") "resources" (list "rayjobs" "rayclusters"))
  (dict "apiGroups" (list "tekton.dev") "resources" (list "pipelineruns" "taskruns"))) -}}
{{- end -}}
{{- toYaml $kinds -}}
{{- end -}}

{{/*
The kinds task plugins create, for the controller (pluginKinds): it
watches each child kind (label-selected); it writes and deletes them as the
plugin's ServiceAccount (plugin-rbac.yaml), not as itself.
*/}}
{{- define "weft.rules.pluginKinds" -}}
{{- $rules := list -}}
{{- range $plugin, $kinds := (include "weft.pluginKindRules" . | fromYaml) -}}
{{- if ne $plugin "pod" -}}
{{- range $kinds -}}
{{- $rules = append $rules (dict "apiGroups" .apiGroups "resources" .resources "verbs" (list "list" "watch")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $rules = concat $rules .Values.pluginKinds.extraRules -}}
{{- if $rules -}}
# Kinds task plugins create (pluginKinds), watched.
{{ toYaml $rules }}
{{- end -}}
{{- end -}}

{{/*
Plugin ConfigMaps, in pluginNamespace only: no tenant can load code by
labelling a ConfigMap elsewhere. patch: the weft.dev/plugin-status and
weft.dev/plugin-error annotations the controller keeps on them.
*/}}
{{- define "weft.rules.configmaps" -}}
# Hot-loaded plugin ConfigMaps, their status annotations, and the archives
# of replaced versions that running workflows pin.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, patch, delete]
# Plugin configuration from Secrets (valueFrom.secretKeyRef in manifests),
# read at load and followed for changes; read-only.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
{{- end -}}

{{- define "weft.rules.impersonate" -}}
# --impersonate-plugins: act as each plugin's ServiceAccount
# weft-plugin-NAME (they live here) to write that plugin's resources.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [impersonate]
{{- end -}}

{{- define "weft.rules.events" -}}
# Events on plugin ConfigMaps.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{- define "weft.rules.leases" -}}
# Leader election: the Lease <fullname>-controller (-shard-<i>).
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}

{{/*
The admission webhook's certificate, in the release namespace (where the
controller runs): the Secret <fullname>-webhook-certs, created once by the
first replica (a create has no name, so it cannot be limited to one) and
replaced when renewed. It is read by the plugin Secrets rule when
pluginNamespace is the release namespace, else here, by name.
*/}}
{{- define "weft.rules.webhookSecret" -}}
# The admission webhook's CA and serving certificate.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [{{ include "weft.webhookSecret" . }}]
  verbs: [{{ if ne (include "weft.pluginNamespace" .) .Release.Namespace }}get, {{ end }}update]
{{- end -}}

{{/*
The admission webhook's two configurations (cluster-scoped, so always in a
ClusterRole): their caBundle is kept on the CA of the webhook's Secret, by
name only; never created, listed or deleted (the chart ships them).
*/}}
{{- define "weft.rules.webhookConfigurations" -}}
# The admission webhook's configurations: the caBundle, kept current.
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ include "weft.validatingWebhook" . }}]
  verbs: [get, update]
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations]
  resourceNames: [{{ include "weft.mutatingWebhook" . }}]
  verbs: [get, update]
{{- end -}}
