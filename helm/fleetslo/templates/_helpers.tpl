{{/*
Names, labels and the values every template derives from the FleetSLO specs. Helpers that return
structured data render YAML; callers parse it with fromYaml.
*/}}

{{- define "fleetslo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fleetslo.fullname" -}}
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

{{/* A name for one part: "<fullname>-<suffix>", within 63 characters. */}}
{{- define "fleetslo.partname" -}}
{{- $full := include "fleetslo.fullname" .root -}}
{{- printf "%s-%s" ($full | trunc (int (sub 62 (len .suffix)))) .suffix | trimSuffix "-" -}}
{{- end -}}

{{- define "fleetslo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetslo.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of every object; .component names the part (controller, vllm, monitoring, ...). */}}
{{- define "fleetslo.labels" -}}
{{ include "fleetslo.selectorLabels" . }}
app.kubernetes.io/part-of: fleetslo
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* An image reference from {repository, tag, digest}; .default is the tag when none is set. */}}
{{- define "fleetslo.imageRef" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (default .default .image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "fleetslo.image" -}}
{{- include "fleetslo.imageRef" (dict "image" .Values.image "default" .Chart.AppVersion) -}}
{{- end -}}

{{/*
The security context of every fleetslo container (controller, sidecar): not configurable beyond the
user and group, so no values file can weaken it. .user and .group are the numeric ids.
*/}}
{{- define "fleetslo.securityContext" -}}
runAsNonRoot: true
runAsUser: {{ .user }}
runAsGroup: {{ .group }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The FleetSLO documents: {items: [...]}, each with apiVersion and kind filled in. */}}
{{- define "fleetslo.slos" -}}
{{- $items := list -}}
{{- range .Values.slos -}}
{{- $items = append $items (merge (dict "apiVersion" "fleetslo/v1" "kind" "FleetSLO") (deepCopy .)) -}}
{{- end -}}
{{- toYaml (dict "items" $items) -}}
{{- end -}}

{{/* A spec's target with the loader's defaults (kind Deployment, namespace default). */}}
{{- define "fleetslo.target" -}}
{{- $t := .spec.target -}}
{{- toYaml (dict "kind" (default "Deployment" $t.kind) "namespace" (default "default" $t.namespace) "name" $t.name "model_name" $t.model_name) -}}
{{- end -}}

{{/* The namespaces of every target, sorted, one per line. */}}
{{- define "fleetslo.targetNamespaces" -}}
{{- $nss := list -}}
{{- range .Values.slos -}}
{{- $nss = append $nss (fromYaml (include "fleetslo.target" .)).namespace -}}
{{- end -}}
{{- $nss | uniq | sortAlpha | join "\n" -}}
{{- end -}}

{{/* The controller's settings as it will read them: the chart's part merged with controller.config. */}}
{{- define "fleetslo.controllerConfig" -}}
{{- $v := .Values -}}
{{- $base := dict
  "listen" (printf "0.0.0.0:%d" (int $v.controller.port))
  "dry_run" $v.controller.dryRun
  "kubernetes" (dict "in_cluster" "true")
  "leader_election" (dict "enabled" true "namespace" .Release.Namespace "name" (include "fleetslo.partname" (dict "root" . "suffix" "leader")))
  "engine_args" (dict "container" "vllm")
  "gate" (dict "admin_port" (int $v.vllm.sidecar.ports.admin) "token_file" "/var/run/fleetslo/gate-token/token")
-}}
{{- $_ := set $base "resources" (dict "enabled" $v.fleetsloResources.enabled "namespaces" (include "fleetslo.watchedNamespaces" . | splitList "\n" | compact) "resync" $v.fleetsloResources.resync) -}}
{{- if $v.controller.prometheusToken.secretName -}}
{{- $_ := set $base "source" (dict "prometheus" (dict "bearer_token_file" "/var/run/fleetslo/prometheus-token/token")) -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $base (deepCopy $v.controller.config)) -}}
{{- end -}}

{{/* Seconds in a duration of the controller settings: a number, or "90s", "2m", "1h". */}}
{{- define "fleetslo.seconds" -}}
{{- $d := toString . -}}
{{- if hasSuffix "ms" $d -}}{{ div (int (trimSuffix "ms" $d)) 1000 }}
{{- else if hasSuffix "s" $d -}}{{ int (float64 (trimSuffix "s" $d)) }}
{{- else if hasSuffix "m" $d -}}{{ mul (int (trimSuffix "m" $d)) 60 }}
{{- else if hasSuffix "h" $d -}}{{ mul (int (trimSuffix "h" $d)) 3600 }}
{{- else -}}{{ int (float64 $d) }}
{{- end -}}
{{- end -}}

{{/*
The controller pod's grace period: the longest reconcile it may be finishing when stopped (a drain
to gate.drain_timeout, then the scale write within kubernetes.api_budget), plus time to release
the Lease. The settings' defaults are 60 s and 20 s.
*/}}
{{- define "fleetslo.controllerGracePeriod" -}}
{{- $cfg := fromYaml (include "fleetslo.controllerConfig" .) -}}
{{- $drain := include "fleetslo.seconds" (dig "gate" "drain_timeout" 60 $cfg) | int -}}
{{- $budget := include "fleetslo.seconds" (dig "kubernetes" "api_budget" 20 $cfg) | int -}}
{{- add $drain $budget 15 -}}
{{- end -}}

{{/*
What the controller does to each target, from the specs and its settings; RBAC is derived from it.
{targets: [{namespace, kind, name, writes, engineArgs, pods, markPods}], events, leases}
*/}}
{{- define "fleetslo.permissions" -}}
{{- $cfg := fromYaml (include "fleetslo.controllerConfig" .) -}}
{{- $dry := or .Values.controller.dryRun (default false $cfg.dry_run) -}}
{{- $source := dig "source" "kind" "prometheus" $cfg -}}
{{- $drain := dig "drain" "enabled" true $cfg -}}
{{- $targets := list -}}
{{- range .Values.slos -}}
{{- $t := fromYaml (include "fleetslo.target" .) -}}
{{- $actuator := dig "batch_limit" "actuator" "none" .spec -}}
{{- $writes := and (not $dry) (ne (default "enforce" .spec.mode) "advisory") -}}
{{- $pods := or (eq $actuator "gate") (eq $source "direct") -}}
{{- $mark := and $writes (eq $actuator "gate") $drain (eq $t.kind "Deployment") -}}
{{- $targets = append $targets (dict "namespace" $t.namespace "kind" $t.kind "name" $t.name "writes" $writes "engineArgs" (and $writes (eq $actuator "engine-args")) "pods" $pods "markPods" $mark) -}}
{{- end -}}
{{- toYaml (dict "targets" $targets "events" (not $dry) "leases" (dig "leader_election" "enabled" true $cfg)) -}}
{{- end -}}

{{/*
RBAC rules for the targets in .namespaces (a list), least privilege, no wildcards:
get the workload; patch its scale subresource (enforced targets); patch the workload itself only for
engine-args rollouts; list pods (gate or direct source), patch pods (deletion cost before a
drained scale-down); create and patch Events.
*/}}
{{- define "fleetslo.rbacRules" -}}
{{- $root := .root -}}
{{- $perm := fromYaml (include "fleetslo.permissions" $root) -}}
{{- $kinds := dict "Deployment" (list "apps" "deployments") "StatefulSet" (list "apps" "statefulsets") "LeaderWorkerSet" (list "leaderworkerset.x-k8s.io" "leaderworkersets") -}}
{{- $restrict := $root.Values.rbac.restrictToTargets -}}
{{- $rules := list -}}
{{- $listPods := false -}}
{{- $patchPods := false -}}
{{- range $kind := list "Deployment" "StatefulSet" "LeaderWorkerSet" -}}
{{- $get := list -}}
{{- $scale := list -}}
{{- $patch := list -}}
{{- range $perm.targets -}}
{{- if and (has .namespace $.namespaces) (eq .kind $kind) -}}
{{- $get = append $get .name -}}
{{- if .writes }}{{ $scale = append $scale .name }}{{ end -}}
{{- if .engineArgs }}{{ $patch = append $patch .name }}{{ end -}}
{{- if .pods }}{{ $listPods = true }}{{ end -}}
{{- if .markPods }}{{ $patchPods = true }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $group := index (index $kinds $kind) 0 -}}
{{- $plural := index (index $kinds $kind) 1 -}}
{{- range $verbs := list (list $get $plural "get") (list $scale (printf "%s/scale" $plural) "patch") (list $patch $plural "patch") -}}
{{- $names := index $verbs 0 | uniq | sortAlpha -}}
{{- if $names -}}
{{- $rule := dict "apiGroups" (list $group) "resources" (list (index $verbs 1)) "verbs" (list (index $verbs 2)) -}}
{{- if $restrict }}{{ $_ := set $rule "resourceNames" $names }}{{ end -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $podVerbs := list -}}
{{- if $listPods }}{{ $podVerbs = append $podVerbs "list" }}{{ end -}}
{{- if $patchPods }}{{ $podVerbs = append $podVerbs "patch" }}{{ end -}}
{{- if $podVerbs -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods") "verbs" $podVerbs) -}}
{{- end -}}
{{- if $perm.events -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "create" "patch")) -}}
{{- end -}}
{{- toYaml (dict "rules" $rules) -}}
{{- end -}}

{{/* The FleetSLO that the reference vLLM Deployment serves (target name = vllm.name), or {}. */}}
{{- define "fleetslo.vllmSlo" -}}
{{- $found := dict -}}
{{- range .Values.slos -}}
{{- $t := fromYaml (include "fleetslo.target" .) -}}
{{- if and (eq $t.name $.Values.vllm.name) (eq $t.kind "Deployment") (not $found.spec) -}}
{{- $found = . -}}
{{- end -}}
{{- end -}}
{{- toYaml $found -}}
{{- end -}}

{{- define "fleetslo.vllmNamespace" -}}
{{- $slo := fromYaml (include "fleetslo.vllmSlo" .) -}}
{{- if .Values.vllm.namespace -}}
{{- .Values.vllm.namespace -}}
{{- else if $slo.spec -}}
{{- (fromYaml (include "fleetslo.target" $slo)).namespace -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Every namespace that needs the gate token: the release namespace, the vLLM namespace, and the
namespaces watched for FleetSLO resources (their vLLM pods' sidecars mount it). */}}
{{- define "fleetslo.gateTokenNamespaces" -}}
{{- $nss := list .Release.Namespace -}}
{{- if .Values.vllm.enabled }}{{ $nss = append $nss (include "fleetslo.vllmNamespace" .) }}{{ end -}}
{{- if .Values.controller.enabled }}{{ $nss = concat $nss (include "fleetslo.watchedNamespaces" . | splitList "\n" | compact) }}{{ end -}}
{{- $nss | uniq | join "\n" -}}
{{- end -}}

{{- define "fleetslo.gateTokenSecret" -}}
{{- default (include "fleetslo.partname" (dict "root" . "suffix" "gate-token")) .Values.gateToken.existingSecret -}}
{{- end -}}

{{/*
The namespaces watched for FleetSLO resources, one per line: fleetsloResources.namespaces, else the
release namespace; nothing with rbac.clusterWide (every namespace) or with the resources off.
*/}}
{{- define "fleetslo.watchedNamespaces" -}}
{{- if and .Values.fleetsloResources.enabled (not .Values.rbac.clusterWide) -}}
{{- default (list .Release.Namespace) .Values.fleetsloResources.namespaces | uniq | sortAlpha | join "\n" -}}
{{- end -}}
{{- end -}}

{{/* Whether a FleetSLO uses the gate (then the controller needs the token); any FleetSLO resource may. */}}
{{- define "fleetslo.usesGate" -}}
{{- if .Values.fleetsloResources.enabled }}true{{ end -}}
{{- range .Values.slos -}}
{{- if eq (dig "batch_limit" "actuator" "none" .spec) "gate" }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/*
Whether a prometheus-operator object is rendered: .enabled is true, false or "auto" (the cluster
serves monitoring.coreos.com/v1; `helm template` needs --api-versions monitoring.coreos.com/v1).
*/}}
{{- define "fleetslo.monitoringOn" -}}
{{- if eq (toString .enabled) "auto" -}}
{{- if .root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end -}}
{{- else if .enabled -}}
true
{{- end -}}
{{- end -}}
