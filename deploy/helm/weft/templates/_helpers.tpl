{{/* The chart name, for app.kubernetes.io/name. */}}
{{- define "weft.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every name: "weft" for the release `weft`. */}}
{{- define "weft.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The controller's Deployment, ServiceAccount, RBAC and Lease name. */}}
{{- define "weft.controller" -}}
{{- printf "%s-controller" (include "weft.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "weft.adminConfigMap" -}}
{{- printf "%s-admin" (include "weft.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The admission webhook's Service, its certificate's Secret and its two
configurations. With the release name `weft` these are the names `weft
controller` defaults to (weft-webhook, weft-webhook-certs, weft-validating,
weft-pod-secrets); otherwise the Deployment passes them (weft.webhookArgs).
*/}}
{{- define "weft.webhookService" -}}
{{- printf "%s-webhook" (include "weft.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "weft.webhookSecret" -}}
{{- printf "%s-webhook-certs" (include "weft.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "weft.validatingWebhook" -}}
{{- printf "%s-validating" (include "weft.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "weft.mutatingWebhook" -}}
{{- printf "%s-pod-secrets" (include "weft.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "weft.pluginNamespace" -}}
{{- default .Release.Namespace .Values.pluginNamespace -}}
{{- end -}}

{{/* What selects the controller's pods (all shards). */}}
{{- define "weft.selectorLabels" -}}
app.kubernetes.io/name: {{ include "weft.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Labels of every object the chart renders (plugin ConfigMaps excepted). */}}
{{- define "weft.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "weft.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: weft
{{- end -}}

{{- define "weft.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
A duration as humantime writes it ("15s", "500ms", "1m30s") in milliseconds,
to check the leader election timings against each other at render time.
*/}}
{{- define "weft.durationMs" -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" . -1 -}}
{{- $n := regexFind "^[0-9]+" . | int -}}
{{- $unit := trimPrefix (regexFind "^[0-9]+" .) . -}}
{{- $scale := get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit -}}
{{- $total = add $total (mul $n $scale) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
Checks that values cannot express in values.schema.json; fails with a
message naming the value.
*/}}
{{- define "weft.validate" -}}
{{- range $key := list "listen" "tls" -}}
{{- if hasKey $.Values.admin.config $key -}}
{{- fail (printf "admin.config.%s: set admin.%s instead (the chart writes %s into admin.yaml)" $key (ternary "port" "tls.enabled" (eq $key "listen")) $key) -}}
{{- end -}}
{{- end -}}
{{- if .Values.leaderElection.enabled -}}
{{- $le := .Values.leaderElection -}}
{{- $lease := include "weft.durationMs" $le.leaseDuration | int -}}
{{- $renew := include "weft.durationMs" $le.renewDeadline | int -}}
{{- $retry := include "weft.durationMs" $le.retryPeriod | int -}}
{{- if not (and (lt $retry $renew) (lt $renew $lease)) -}}
{{- fail (printf "leaderElection: need retryPeriod (%s) < renewDeadline (%s) < leaseDuration (%s)" $le.retryPeriod $le.renewDeadline $le.leaseDuration) -}}
{{- end -}}
{{- end -}}
{{- if .Values.webhook.enabled -}}
{{- $port := int .Values.webhook.port -}}
{{- if or (eq $port (int .Values.admin.port)) (eq $port (int .Values.metrics.port)) -}}
{{- fail (printf "webhook.port: %d is already admin.port or metrics.port" $port) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.admin.tls.clientAuthOptional (not .Values.admin.tls.clientCa) -}}
{{- fail "admin.tls.clientAuthOptional needs admin.tls.clientCa" -}}
{{- end -}}
{{- end -}}

{{/* admin.yaml: listen and tls from the values, then admin.config. */}}
{{- define "weft.adminYaml" -}}
listen: 0.0.0.0:{{ .Values.admin.port }}
{{- with .Values.admin.tls }}
{{- if .enabled }}
tls:
  cert: /etc/weft/tls/tls.crt
  key: /etc/weft/tls/tls.key
  {{- if .clientCa }}
  clientCa: /etc/weft/tls/ca.crt
  {{- if .clientAuthOptional }}
  clientAuthOptional: true
  {{- end }}
  {{- end }}
{{- end }}
{{- end }}
{{- /* The usual keys first, in the order of deploy/base/admin-config.yaml. */}}
{{- $config := .Values.admin.config | default dict }}
{{- $first := list "middleware" "authorization" "maxMessageBytes" }}
{{- range $first }}
{{- if hasKey $config . }}
{{ toYaml (dict . (get $config .)) }}
{{- end }}
{{- end }}
{{- with omit $config "middleware" "authorization" "maxMessageBytes" }}
{{ toYaml . }}
{{- end }}
{{- end -}}
