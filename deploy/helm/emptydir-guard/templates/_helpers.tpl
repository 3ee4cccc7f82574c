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

{{/*
"true" when the exporters notify the remediator directly (remediator.notices): both deployed, and
no web config on the remediator, whose basic auth or client certificates would refuse them.
*/}}
{{- define "emptydir-guard.notices" -}}
{{- if and .Values.exporter.enabled .Values.remediator.enabled .Values.remediator.notices.enabled (not .Values.remediator.webConfig) -}}
true
{{- end -}}
{{- end -}}

{{/* Where the exporter's token for the remediator is mounted. */}}
{{- define "emptydir-guard.noticeTokenDir" -}}
/var/run/secrets/emptydir-remediator
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
{{- $fast := $m.exporterInterval | default $root.Values.exporter.collectionInterval | default (ternary "5s" "30s" (eq (include "emptydir-guard.exporter.values" $root | fromYaml).source "filesystem")) }}
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

{{/*
The node layout of each preset (value preset, docs/deploy.md "Presets"): what an exporter value
left empty (or null) takes. Each starts from generic's (a YAML merge key) and says what differs.
*/}}
{{- define "emptydir-guard.presets" -}}
generic: &generic
  source: filesystem
  kubeletRootDir: /var/lib/kubelet
  podLogsDir: /var/log/pods
  containerd: true
  containerdStateDir: /run/containerd
  containerdRoot: /var/lib/containerd
  crio: false
  crioRoot: /var/lib/containers/storage
  docker: false
  dockerRoot: /var/lib/docker
  cgroupRoot: auto
k3s:
  <<: *generic
  containerdStateDir: /run/k3s/containerd
  containerdRoot: /var/lib/rancher/k3s/agent/containerd
rke2:
  <<: *generic
  containerdStateDir: /run/k3s/containerd
  containerdRoot: /var/lib/rancher/rke2/agent/containerd
k0s:
  <<: *generic
  kubeletRootDir: /var/lib/k0s/kubelet
  containerdStateDir: /run/k0s/containerd
  containerdRoot: /var/lib/k0s/containerd
microk8s:
  <<: *generic
  kubeletRootDir: /var/snap/microk8s/common/var/lib/kubelet
  containerdStateDir: /var/snap/microk8s/common/run/containerd
  containerdRoot: /var/snap/microk8s/common/var/lib/containerd
kind:
  <<: *generic
  cgroupRoot: /kubelet
openshift:
  <<: *generic
  containerd: false
  crio: true
minikube:
  <<: *generic
  containerd: false
  docker: true
gke-autopilot:
  <<: *generic
  source: kubelet
{{- end -}}

{{/*
Fills the exporter values the user left empty (or null) from the preset's layout, in place.
Arguments: (list $ $e), $e a deepCopy of .Values.exporter.
*/}}
{{- define "emptydir-guard.exporter.applyPreset" -}}
{{- $root := index . 0 }}
{{- $e := index . 1 }}
{{- $p := index (include "emptydir-guard.presets" $root | fromYaml) $root.Values.preset }}
{{- if not $p }}{{ fail (printf "preset %q: unknown" $root.Values.preset) }}{{ end }}
{{- if not $e.source }}{{ $_ := set $e "source" $p.source }}{{ end }}
{{- if not $e.kubeletRootDir }}{{ $_ := set $e "kubeletRootDir" $p.kubeletRootDir }}{{ end }}
{{- $es := $e.ephemeralStorage }}
{{- if not $es.podLogsDir }}{{ $_ := set $es "podLogsDir" $p.podLogsDir }}{{ end }}
{{- if kindIs "invalid" $es.containerd.enabled }}{{ $_ := set $es.containerd "enabled" $p.containerd }}{{ end }}
{{- if not $es.containerd.stateDir }}{{ $_ := set $es.containerd "stateDir" $p.containerdStateDir }}{{ end }}
{{- if not $es.containerd.root }}{{ $_ := set $es.containerd "root" $p.containerdRoot }}{{ end }}
{{- if kindIs "invalid" $es.crio.enabled }}{{ $_ := set $es.crio "enabled" $p.crio }}{{ end }}
{{- if not $es.crio.storageRoot }}{{ $_ := set $es.crio "storageRoot" $p.crioRoot }}{{ end }}
{{- if kindIs "invalid" $es.docker.enabled }}{{ $_ := set $es.docker "enabled" $p.docker }}{{ end }}
{{- if not $es.docker.root }}{{ $_ := set $es.docker "root" $p.dockerRoot }}{{ end }}
{{- if not $e.changeSignal.cgroupRoot }}{{ $_ := set $e.changeSignal "cgroupRoot" $p.cgroupRoot }}{{ end }}
{{- end -}}

{{/*
The exporter's values with the preset applied, as YAML (for templates other than the
DaemonSet's that read a preset-controlled value).
*/}}
{{- define "emptydir-guard.exporter.values" -}}
{{- $e := deepCopy .Values.exporter }}
{{- $_ := include "emptydir-guard.exporter.applyPreset" (list . $e) }}
{{- toYaml $e }}
{{- end -}}

{{/*
The exporter container's securityContext: exporter.securityContext as its source needs it (the
kubelet source without DAC_READ_SEARCH and not as root; SYS_ADMIN for project quotas,
SYS_PTRACE for open files) and, on OpenShift, the SELinux type spc_t that lets the filesystem
source read the pods' files (container_t may not). As YAML. Arguments: (list $ $e), $e the
exporter's values with the preset applied.
*/}}
{{- define "emptydir-guard.exporter.securityContext" -}}
{{- $root := index . 0 }}
{{- $e := index . 1 }}
{{- $sc := deepCopy ($e.securityContext | default dict) }}
{{- if not (eq $e.source "filesystem") }}
{{- /* The kubelet source reads no file of the node: without DAC_READ_SEARCH, and
       as 65532 where the values say uid 0 (the filesystem source's default). */}}
{{- with $sc.capabilities }}
{{- $add := without (.add | default list) "DAC_READ_SEARCH" }}
{{- if $add }}{{ $_ := set . "add" $add }}{{ else }}{{ $_ := unset . "add" }}{{ end }}
{{- end }}
{{- if and (hasKey $sc "runAsUser") (eq (int $sc.runAsUser) 0) }}
{{- $_ := set $sc "runAsUser" 65532 }}
{{- $_ := set $sc "runAsGroup" 65532 }}
{{- $_ := set $sc "runAsNonRoot" true }}
{{- end }}
{{- end }}
{{- if and (eq $e.source "filesystem") $e.projectQuota.enabled }}
{{- /* quotactl_fd(Q_GETQUOTA) of another project needs CAP_SYS_ADMIN. */}}
{{- $caps := $sc.capabilities | default dict }}
{{- $_ := set $caps "add" (append ($caps.add | default list) "SYS_ADMIN" | uniq) }}
{{- $_ := set $sc "capabilities" $caps }}
{{- end }}
{{- if (and (eq $e.source "filesystem") $e.openFiles.enabled) }}
{{- /* Reading another process's /proc/<pid>/fd needs PTRACE_MODE_READ on it. */}}
{{- $caps := $sc.capabilities | default dict }}
{{- $_ := set $caps "add" (append ($caps.add | default list) "SYS_PTRACE" | uniq) }}
{{- $_ := set $sc "capabilities" $caps }}
{{- end }}
{{- if and (eq $e.source "filesystem") (include "emptydir-guard.openshift" $root) (not $sc.seLinuxOptions) }}
{{- $_ := set $sc "seLinuxOptions" (dict "type" "spc_t") }}
{{- end }}
{{- toYaml $sc }}
{{- end -}}

{{/*
"true" where the release installs on OpenShift: preset openshift, or the cluster serves its
SecurityContextConstraints API; "" otherwise.
*/}}
{{- define "emptydir-guard.openshift" -}}
{{- if or (eq .Values.preset "openshift") (.Capabilities.APIVersions.Has "security.openshift.io/v1") }}true{{ end }}
{{- end -}}

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
