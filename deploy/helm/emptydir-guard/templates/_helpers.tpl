{{/*
Names. The exporter and the remediator are called emptydir-exporter and emptydir-remediator,
like their commands, prefixed with the release name unless the release is called like the
chart. Both always contain "emptydir-exporter"/"emptydir-remediator", so the scrape jobs the
Prometheus Operator derives from them match the rules' job selectors (rules/, docs/alerting.md).
*/}}
{{- define "emptydir-guard.componentName" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if eq $root.Release.Name $root.Chart.Name -}}
{{- $name -}}
{{- else -}}
{{- printf "%s-%s" $root.Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "emptydir-guard.exporter.fullname" -}}
{{- include "emptydir-guard.componentName" (list . "emptydir-exporter") -}}
{{- end -}}

{{- define "emptydir-guard.remediator.fullname" -}}
{{- include "emptydir-guard.componentName" (list . "emptydir-remediator") -}}
{{- end -}}

{{- define "emptydir-guard.exporter.serviceAccountName" -}}
{{- if .Values.exporter.serviceAccount.create -}}
{{- default (include "emptydir-guard.exporter.fullname" .) .Values.exporter.serviceAccount.name -}}
{{- else -}}
{{- required "exporter.serviceAccount.name is required when exporter.serviceAccount.create is false" .Values.exporter.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "emptydir-guard.remediator.serviceAccountName" -}}
{{- if .Values.remediator.serviceAccount.create -}}
{{- default (include "emptydir-guard.remediator.fullname" .) .Values.remediator.serviceAccount.name -}}
{{- else -}}
{{- required "remediator.serviceAccount.name is required when remediator.serviceAccount.create is false" .Values.remediator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The webhook token Secret: an existing one, or the one this chart generates. */}}
{{- define "emptydir-guard.remediator.tokenSecretName" -}}
{{- default (printf "%s-webhook" (include "emptydir-guard.remediator.fullname" .)) .Values.remediator.webhookToken.existingSecret -}}
{{- end -}}

{{/* Selector labels: stable for the life of a release (selectors are immutable). */}}
{{- define "emptydir-guard.exporter.selectorLabels" -}}
app.kubernetes.io/name: emptydir-exporter
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "emptydir-guard.remediator.selectorLabels" -}}
app.kubernetes.io/name: emptydir-remediator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Labels of every object. helmLabels: false leaves out the labels that say Helm manages the
object, for the plain manifests rendered from this chart (deploy/, the kustomize base).
*/}}
{{- define "emptydir-guard.commonLabels" -}}
app.kubernetes.io/part-of: emptydir-guard
{{- if .Values.helmLabels }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ include "emptydir-guard.imageTag" . | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "emptydir-guard.exporter.labels" -}}
{{ include "emptydir-guard.exporter.selectorLabels" . }}
app.kubernetes.io/component: exporter
{{ include "emptydir-guard.commonLabels" . }}
{{- end -}}

{{- define "emptydir-guard.remediator.labels" -}}
{{ include "emptydir-guard.remediator.selectorLabels" . }}
app.kubernetes.io/component: remediator
{{ include "emptydir-guard.commonLabels" . }}
{{- end -}}

{{/*
The image tag: image.tag, else the release's own tag v<appVersion> (the git tag vX.Y.Z the chart
was packaged from; an appVersion given with its v is taken as it is).
*/}}
{{- define "emptydir-guard.imageTag" -}}
{{- .Values.image.tag | default (printf "v%s" (trimPrefix "v" .Chart.AppVersion)) -}}
{{- end -}}

{{- define "emptydir-guard.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "emptydir-guard.imageTag" .) -}}
{{- end -}}

{{/*
Probe handler for a web server with an exporter-toolkit web config: HTTPS with TLS, a TCP
check when basic auth would answer the kubelet's probe with 401.
Arguments: (list webConfig path portName).
*/}}
{{- define "emptydir-guard.probe" -}}
{{- $web := index . 0 -}}
{{- if and $web $web.basic_auth_users -}}
tcpSocket:
  port: {{ index . 2 }}
{{- else -}}
httpGet:
  path: {{ index . 1 }}
  port: {{ index . 2 }}
  {{- if and $web $web.tls_server_config }}
  scheme: HTTPS
  {{- end }}
{{- end -}}
{{- end -}}

{{/*
The optional tuning flags: --flag=value lines, only for the values that are set. Booleans are
--flag or --no-flag: kingpin takes no value after a boolean flag.
*/}}
{{- define "emptydir-guard.flags" -}}
{{- $lines := list -}}
{{- range $flag, $value := . -}}
{{- if kindIs "bool" $value -}}
{{- $lines = append $lines (printf "- --%s%s" (ternary "" "no-" $value) $flag) -}}
{{- else if kindIs "slice" $value -}}
{{- range $value -}}
{{- $lines = append $lines (printf "- --%s=%v" $flag .) -}}
{{- end -}}
{{- else if not (kindIs "invalid" $value) -}}
{{- $lines = append $lines (printf "- --%s=%v" $flag $value) -}}
{{- end -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end -}}

{{/*
The exporter's scrape endpoints of a PodMonitor or ServiceMonitor (dict: root, m the monitor's
values, job the operator's job label of the monitor). With exporterSlowInterval set, two
endpoints: the series the over-limit alerts compare (collect[]=trigger) at exporterInterval,
the pace of remediation, and the rest (exclude[]=trigger) at exporterSlowInterval under the job
"<job>-slow" (the two scrapes' up and scrape_* series would collide under one job). Empty:
one endpoint with every series at exporterInterval.
*/}}
{{- define "emptydir-guard.exporter.scrapeEndpoints" -}}
{{- $root := .root }}
{{- $m := .m }}
{{- $fast := $m.exporterInterval | default $root.Values.exporter.collectionInterval | default (ternary "5s" "30s" (eq $root.Values.exporter.source "filesystem")) }}
{{- $scrapes := list (dict "interval" $fast) }}
{{- if $m.exporterSlowInterval }}
{{- $scrapes = list (dict "interval" $fast "params" (dict "collect[]" (list "trigger"))) (dict "interval" $m.exporterSlowInterval "params" (dict "exclude[]" (list "trigger")) "job" (printf "%s-slow" .job)) }}
{{- end }}
{{- range $scrapes }}
- port: metrics
  path: /metrics
  {{- with .params }}
  params:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  interval: {{ .interval }}
  {{- with $m.scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
  {{- if $root.Values.exporter.webConfig.tls_server_config }}
  scheme: https
  {{- end }}
  # The volume series carry the measured pod's own namespace and pod labels: without
  # honorLabels the operator's target labels (the exporter pod's) would win and rename
  # them exported_namespace/exported_pod, and every alert would name the exporter pod.
  # The exporter's self-metrics have neither label and keep the target's.
  honorLabels: true
  # The rules and dashboards use the exporter's own `node` label; keep the target's
  # instance as it is and drop nothing.
  relabelings:
    - sourceLabels: [__meta_kubernetes_pod_node_name]
      targetLabel: kubernetes_node
    {{- with .job }}
    - targetLabel: job
      replacement: {{ . }}
    {{- end }}
{{- end }}
{{- end }}

{{/*
"true" when the PrometheusRule carries EmptyDirRemediationRoute, the copy of the remediation
triggers in the release namespace that the AlertmanagerConfig routes under the Alertmanager's
matcher strategy OnNamespace (alertmanagerConfig.matcherStrategy).
*/}}
{{- define "emptydir-guard.routingCopies" -}}
{{- and .Values.prometheusRule.enabled .Values.alertmanagerConfig.enabled .Values.remediator.enabled (eq .Values.alertmanagerConfig.matcherStrategy "OnNamespace") -}}
{{- end }}

{{/*
The remediation label values the AlertmanagerConfig routes to the remediator, joined by "|":
evict, and evict_incomplete when remediator.flags.policy.evict-incomplete-after is set (without
it the remediator declines those alerts unread, so they are not sent).
*/}}
{{- define "emptydir-guard.routedRemediations" -}}
{{- $after := toString (index .Values.remediator.flags "policy.evict-incomplete-after" | default "") -}}
{{- if and $after (not (has $after (list "0" "0s" "<nil>"))) -}}
evict|evict_incomplete
{{- else -}}
evict
{{- end -}}
{{- end }}

{{/*
A CEL string literal of the given string, single-quoted (the policy's expressions are YAML
folded blocks, where a value is pasted as it is).
*/}}
{{- define "emptydir-guard.celString" -}}
{{- printf "'%s'" (. | replace "\\" "\\\\" | replace "'" "\\'" | replace "\n" "\\n") -}}
{{- end }}

{{- /*
The NetworkPolicyPeer admitting Prometheus or Alertmanager (.kind), as a one-item list: the
peer's own namespaceSelector (or ipBlock) when set; else the namespaces of
networkPolicy.monitoringNamespaces; else those of the Prometheus Operator's objects of that kind
found at install (the API group checked first: lookup fails on an unknown one). A guard admitting
no namespace would get no scrapes and no webhooks without a word, so nothing found fails the
install (helm template has no cluster: set the value).
*/}}
{{- define "emptydir-guard.monitoringPeer" -}}
{{- $peer := deepCopy .peer -}}
{{- if not (or (hasKey $peer "namespaceSelector") (hasKey $peer "ipBlock")) -}}
{{- $names := .root.Values.networkPolicy.monitoringNamespaces | default list -}}
{{- if and (not $names) (.root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind)) -}}
{{- range (lookup "monitoring.coreos.com/v1" .kind "" "").items | default list -}}
{{- $names = append $names .metadata.namespace -}}
{{- end -}}
{{- end -}}
{{- if not $names -}}
{{- fail (printf "networkPolicy: no namespace to admit %s from. Set networkPolicy.monitoringNamespaces to the namespaces your Prometheus and Alertmanager run in (at install the chart looks for the Prometheus Operator's %s objects: none found, or helm template, which cannot look), or networkPolicy.%s.namespaceSelector, or networkPolicy.enabled=false." .kind .kind (lower .kind)) -}}
{{- end -}}
{{- $names = $names | uniq | sortAlpha -}}
{{- if eq (len $names) 1 -}}
{{- $_ := set $peer "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" (first $names))) -}}
{{- else -}}
{{- $_ := set $peer "namespaceSelector" (dict "matchExpressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" $names))) -}}
{{- end -}}
{{- end -}}
{{- toYaml (list $peer) -}}
{{- end -}}
