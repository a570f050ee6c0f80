{{- define "kronjob.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kronjob.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "kronjob.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "kronjob.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "kronjob.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kronjob.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kronjob.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kronjob.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kronjob.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kronjob.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kronjob.webhookService" -}}
{{ include "kronjob.fullname" . }}-webhook
{{- end }}

{{- define "kronjob.certName" -}}
{{ include "kronjob.fullname" . }}-webhook-cert
{{- end }}

{{- /* Names every release derives from its own, so that releases coexist. */ -}}
{{- define "kronjob.mutatingConfiguration" -}}
{{ include "kronjob.fullname" . }}-mutating
{{- end }}

{{- define "kronjob.validatingConfiguration" -}}
{{ include "kronjob.fullname" . }}-validating
{{- end }}

{{- /* The webhook's certificate is the manager's own (self-signed, kept in a Secret and
the webhook configurations' caBundle): then it needs RBAC for both. */ -}}
{{- define "kronjob.selfSigned" -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.certManager.enabled) }}true{{ end }}
{{- end }}

{{- define "kronjob.certManager" -}}
{{- if and .Values.webhook.enabled .Values.webhook.certManager.enabled }}true{{ end }}
{{- end }}

{{- define "kronjob.leaderLease" -}}
{{ include "kronjob.fullname" . }}-leader
{{- end }}
