{{/* RBAC rules, as lists of rules (rbac.yaml puts them in Roles and the ClusterRole). */}}

{{- define "weft.rules.workflows" -}}
# The controller watches Workflows and patches its finalizer on; the
# admin API gets, lists and watches them, creates them (CreateExecution)
# and patches them (AbortExecution, ApproveGate).
- apiGroups: [weft.dev]
  resources: [workflows]
  verbs: [get, list, watch, create, patch]
# Status is written as a merge patch, only what changed.
- apiGroups: [weft.dev]
  resources: [workflows/status]
  verbs: [patch]
# The pod plugin's children: watched, written with server-side apply
# (authorized as create when it creates, patch always), deleted on abort.
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, create, patch, delete]
# core/v1 Events on Workflows and plugin ConfigMaps (created, never updated).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/*
The kinds task plugins create (pluginKinds). list/watch: the host
watches each child kind (label-selected); create+patch: children are
written with server-side apply; delete: aborts, retries and cleanup.
*/}}
{{- define "weft.rules.pluginKinds" -}}
{{- $verbs := list "list" "watch" "create" "patch" "delete" -}}
{{- $rules := list -}}
{{- if .Values.pluginKinds.spark -}}
{{- $rules = append $rules (dict "apiGroups" (list "sparkoperator.k8s.io") "resources" (list "sparkapplications") "verbs" $verbs) -}}
{{- end -}}
{{- if .Values.pluginKinds.k8sResource -}}
{{- /* plugins/k8s-resource/weft-plugin.yaml `resources`; keep in step. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" $verbs) -}}
{{- $rules = append $rules (dict "apiGroups" (list "kubeflow.org") "resources" (list "pytorchjobs" "tfjobs") "verbs" $verbs) -}}
{{- $rules = append $rules (dict "apiGroups" (list "ray.io") "resources" (list "rayjobs" "rayclusters") "verbs" $verbs) -}}
{{- $rules = append $rules (dict "apiGroups" (list "tekton.dev") "resources" (list "pipelineruns" "taskruns") "verbs" $verbs) -}}
{{- end -}}
{{- $rules = concat $rules .Values.pluginKinds.extraRules -}}
{{- if $rules -}}
# Kinds task plugins create (pluginKinds).
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
