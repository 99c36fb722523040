{{/* ------------------------------------------------------------------ names */}}

{{/* The chart's base name: "dynamic-config" unless nameOverride says otherwise. */}}
{{- define "dc.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every object is named from this, not from the release: the names are what kubectl users,
     kustomize patches and the book refer to, so they stay fixed across releases. */}}
{{- define "dc.fullname" -}}
{{- .Values.fullnameOverride | default (include "dc.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dc.webhook" -}}{{ include "dc.fullname" . }}-webhook{{- end -}}
{{- define "dc.installation" -}}{{ include "dc.webhook" . }}-installation{{- end -}}
{{- define "dc.operator" -}}{{ include "dc.fullname" . }}-operator{{- end -}}
{{- define "dc.nodeAgent" -}}{{ include "dc.fullname" . }}-node-agent{{- end -}}
{{- define "dc.tlsSecret" -}}{{ include "dc.webhook" . }}-tls{{- end -}}

{{- define "dc.webhook.serviceAccount" -}}
{{- if .Values.webhook.serviceAccount.create -}}
{{- .Values.webhook.serviceAccount.name | default (include "dc.webhook" .) -}}
{{- else -}}
{{- .Values.webhook.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "dc.operator.serviceAccount" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- .Values.operator.serviceAccount.name | default (include "dc.operator" .) -}}
{{- else -}}
{{- .Values.operator.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* ----------------------------------------------------------------- labels */}}

{{- define "dc.labels" -}}
app.kubernetes.io/name: {{ include "dc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels: (dict "root" $ "component" "webhook"). Never carries a version, so a
     Deployment's selector does not change on upgrade. */}}
{{- define "dc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dc.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* metadata.labels + metadata.annotations of an object: (dict "root" $ "component" "x"
     "annotations" <map or nil>). The component label is omitted when component is empty. */}}
{{- define "dc.metadata" -}}
labels:
  {{- include "dc.labels" .root | nindent 2 }}
  {{- with .component }}
  app.kubernetes.io/component: {{ . }}
  {{- end }}
{{- $annotations := merge (dict) (.annotations | default (dict)) (.root.Values.commonAnnotations | default (dict)) }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* ----------------------------------------------------------------- images */}}

{{/* global.imageRegistry, checked: "" or a registry host (host, host:port, or either followed
     by a path, as a mirror or a proxy cache serves it). A scheme or a trailing slash fails the
     render here, not as an unpullable name on every node. A release from before the value
     existed (--reuse-values) has no global at all, which is the empty default. */}}
{{- define "dc.imageRegistry" -}}
{{- $registry := dig "imageRegistry" "" (.Values.global | default dict) | toString -}}
{{- if and $registry (not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$" $registry)) -}}
{{- fail (printf "global.imageRegistry is %q, which is not a registry host: set it to host, host:port or host/path with no scheme and no trailing slash (e.g. registry.example:5000), or to \"\" for each image's own registry" $registry) -}}
{{- end -}}
{{- $registry -}}
{{- end -}}

{{/* An image reference from (dict "root" $ "image" <repo> "tag" <tag> "digest" <digest>).
     global.imageRegistry, when set, replaces the registry host of the repository (the first
     path segment when it holds a "." or a ":" or is localhost, as container runtimes read it;
     a repository without one gets the registry in front). An empty tag is the chart's
     appVersion with a "v"; "latest" is refused whatever else is set, because a values file that
     says latest says the author meant "whatever is newest"; a digest wins over a tag. */}}
{{- define "dc.image" -}}
{{- $tag := .tag | default (printf "v%s" .root.Chart.AppVersion) | toString -}}
{{- if eq $tag "latest" -}}
{{- fail "tag \"latest\" is not an identity — pin a version or a digest" -}}
{{- end -}}
{{- $repository := .image | toString -}}
{{- $registry := include "dc.imageRegistry" .root -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repository -}}
{{- $host := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $host) (contains ":" $host) (eq $host "localhost")) -}}
{{- $parts = rest $parts -}}
{{- end -}}
{{- $repository = printf "%s/%s" $registry (join "/" $parts) -}}
{{- end -}}
{{- if .digest -}}
{{- printf "%s@%s" $repository .digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* ------------------------------------------------------------- posture */}}

{{/* The restricted Pod Security Standard, container level. */}}
{{- define "dc.containerSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
readOnlyRootFilesystem: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The restricted Pod Security Standard, pod level. */}}
{{- define "dc.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* --------------------------------------------------------------- TLS */}}

{{/* Which TLS mode: "chart" (minted here), "cert-manager", "selfrotate" or "own-cert" (a Secret
     the installer made). Two of the last three at once is a contradiction, not a preference,
     and fails the render. */}}
{{- define "dc.tlsMode" -}}
{{- $ownCert := dig "ownCert" "enabled" false .Values.webhook -}}
{{- if and .Values.webhook.certManager.enabled .Values.webhook.selfRotate.enabled -}}
{{- fail "webhook.certManager and webhook.selfRotate are two answers to one question: enable at most one" -}}
{{- else if and $ownCert (or .Values.webhook.certManager.enabled .Values.webhook.selfRotate.enabled) -}}
{{- fail "webhook.ownCert brings its own certificate, so webhook.certManager and webhook.selfRotate must stay disabled: enable one of the three at most" -}}
{{- else if .Values.webhook.certManager.enabled -}}
cert-manager
{{- else if .Values.webhook.selfRotate.enabled -}}
selfrotate
{{- else if $ownCert -}}
own-cert
{{- else -}}
chart
{{- end -}}
{{- end -}}

{{/* The Secret the webhook serves from: the installer's own (webhook.ownCert.secretName) or the
     chart's "<webhook>-tls", which the chart, cert-manager or the webhook itself fills. */}}
{{- define "dc.servingSecret" -}}
{{- if eq (include "dc.tlsMode" .) "own-cert" -}}
{{- required "webhook.ownCert.secretName is required: name the kubernetes.io/tls Secret (tls.crt, tls.key) in the release namespace that the webhook serves" .Values.webhook.ownCert.secretName -}}
{{- else -}}
{{- include "dc.tlsSecret" . -}}
{{- end -}}
{{- end -}}

{{/* webhook.ownCert.caBundle as the webhook configuration carries it (base64 of PEM). Given as
     PEM it is encoded here; given as base64 it must decode to a PEM certificate. */}}
{{- define "dc.ownCaBundle" -}}
{{- $given := .Values.webhook.ownCert.caBundle | default "" | toString | trim -}}
{{- if not $given -}}
{{- fail "webhook.ownCert.caBundle is required: set it to the PEM (or base64 of the PEM) of the CA that signed the certificate in webhook.ownCert.secretName, so the API server trusts the webhook" -}}
{{- end -}}
{{- $pem := printf "%s\n" $given -}}
{{- if not (hasPrefix "-----BEGIN" $given) -}}
{{- $pem = b64dec (nospace $given) -}}
{{- end -}}
{{- if not (contains "-----BEGIN CERTIFICATE-----" $pem) -}}
{{- fail "webhook.ownCert.caBundle is neither a PEM certificate nor the base64 of one: give the CA certificate that signed the webhook's certificate, as PEM or base64-encoded PEM" -}}
{{- end -}}
{{- $pem | b64enc -}}
{{- end -}}

{{/* Whether the webhook pod calls the API server, and so needs a service-account token: the
     class poller (webhook.classes.enabled) lists the class kinds, selfRotate writes its Secret
     and caBundle. Every feature that needs the API answers here, so the token mount and the
     NetworkPolicy's egress follow one list. "true" or "false". */}}
{{- define "dc.webhook.callsApi" -}}
{{- if or (eq (include "dc.tlsMode" .) "selfrotate") .Values.webhook.classes.enabled (eq (include "dc.installationReload" .) "resource") -}}
true
{{- else -}}
false
{{- end -}}
{{- end -}}

{{/* The chart-minted pair as YAML {crt, key, ca} (base64). An existing Secret wins: an upgrade
     must not rotate what the webhook configuration trusts behind the operator's back. */}}
{{- define "dc.chartTls" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "dc.tlsSecret" .) -}}
{{- if and $existing $existing.data (index $existing.data "tls.crt") (index $existing.data "ca.crt") -}}
crt: {{ index $existing.data "tls.crt" }}
key: {{ index $existing.data "tls.key" }}
ca: {{ index $existing.data "ca.crt" }}
{{- else -}}
{{- $webhook := include "dc.webhook" . -}}
{{- $days := int .Values.webhook.selfSignedDays -}}
{{- $ca := genCA (printf "%s-ca" $webhook) $days -}}
{{- $names := list (printf "%s.%s.svc" $webhook .Release.Namespace) (printf "%s.%s" $webhook .Release.Namespace) -}}
{{- $leaf := genSignedCert (first $names) nil $names $days $ca -}}
crt: {{ $leaf.Cert | b64enc }}
key: {{ $leaf.Key | b64enc }}
ca: {{ $ca.Cert | b64enc }}
{{- end -}}
{{- end -}}

{{/* ---------------------------------------------------- installation */}}

{{/* How an edited installation takes effect: restart (the pods roll on the document's checksum),
     document (the mounted document is re-read live) or resource (the DynamicConfigInstallation
     the chart renders is followed live). */}}
{{- define "dc.installationReload" -}}
{{- $reload := dig "installation" "reload" "restart" .Values.webhook | toString -}}
{{- if not (has $reload (list "restart" "document" "resource")) -}}
{{- fail (printf "webhook.installation.reload is %q; it takes restart, document or resource" $reload) -}}
{{- end -}}
{{- $reload -}}
{{- end -}}

{{- define "dc.installationResource" -}}{{ include "dc.fullname" . }}{{- end -}}

{{/* The ServiceAccounts that follow the installation resource: the webhook's, and the
     operator's when it runs (its store budgets come from the installation). */}}
{{- define "dc.installationFollowers" -}}
- kind: ServiceAccount
  name: {{ include "dc.webhook.serviceAccount" . }}
  namespace: {{ .Release.Namespace }}
{{- if .Values.operator.enabled }}
- kind: ServiceAccount
  name: {{ include "dc.operator.serviceAccount" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}
{{- end -}}

{{/* The installation document (YAML). With reload "restart" it carries every map-form setting
     (perStore, the gates), or is "" when all of them are strings: the variables carry the rest.
     With "document" or "resource" it carries every setting a document can hold, strings too,
     so that all of them change live; only what no document can carry (the image, the pull
     secret, the opt-ins) stays in variables, which need a rollout. The webhook turns the
     document into the same grammar the variables use. */}}
{{- define "dc.installationDocument" -}}
{{- $doc := dict -}}
{{- $live := ne (include "dc.installationReload" .) "restart" -}}
{{- $d := .Values.agent.defaults -}}
{{- $perStore := $d.perStore -}}
{{- if and $perStore (or $live (kindIs "map" $perStore)) -}}
{{- $_ := set $doc "storeDefaults" $perStore -}}
{{- end -}}
{{- range $gate := list "agentEnvAllow" "sourceAllow" "sourceDeny" -}}
{{- $value := index $.Values.webhook $gate -}}
{{- if and $value (or $live (kindIs "map" $value)) -}}
{{- $_ := set $doc $gate $value -}}
{{- end -}}
{{- end -}}
{{- if $live -}}
{{- range $key := list "cpuRequest" "memoryRequest" "cpuLimit" "memoryLimit" "fileMode" "watchSeconds" "mode" "volumeMedium" "nativeSidecar" "runAsUser" "runAsGroup" "metricsPort" "source" "path" "overridable" -}}
{{- $value := index $d $key -}}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") -}}
{{- $_ := set $doc $key (toString $value) -}}
{{- end -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $d.env)) (ne (toString $d.env) "") -}}
{{- $_ := set $doc "agentEnv" (toString $d.env) -}}
{{- end -}}
{{- end -}}
{{- if $doc -}}
{{- toYaml $doc -}}
{{- end -}}
{{- end -}}

{{/* One env entry, on its own line(s) indented by .indent, when the value is set (neither ""
     nor null): (dict "name" N "value" V "indent" 12). */}}
{{- define "dc.envIfSet" -}}
{{- if and (not (kindIs "invalid" .value)) (ne (toString .value) "") -}}
{{- printf "- name: %s\n  value: %s" .name (toString .value | quote) | nindent (int .indent) -}}
{{- end -}}
{{- end -}}

{{- /* The per-store call budgets the operator and the node agent take (DYNAMIC_CONFIG_STORE_BUDGETS),
read off the one home of per-store settings: agent.defaults.perStore.<store>.store-budget (the
map form; a pin or open marker is the webhook's business and is dropped here). */ -}}
{{- define "dc.storeBudgets" -}}
{{- $perStore := .Values.agent.defaults.perStore -}}
{{- $out := list -}}
{{- if kindIs "map" $perStore -}}
{{- range $store := keys $perStore | sortAlpha -}}
{{- $knobs := get $perStore $store -}}
{{- if and (kindIs "map" $knobs) (hasKey $knobs "store-budget") -}}
{{- $out = append $out (printf "%s=%s" $store (get $knobs "store-budget" | toString | trimSuffix "!" | trimSuffix "?")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join ", " $out -}}
{{- end -}}

{{/* ------------------------------------------------------------- node agent */}}

{{/* How the kubelet learns the driver exists: "registrar" (upstream's node-driver-registrar
     beside the node agent, the default) or "builtin" (the node agent serves the kubelet's
     plugin registration itself). A key absent from an older release's values is the default;
     anything else fails the render here too, for a render that skipped the schema, rather
     than quietly picking one. */}}
{{- define "dc.nodeAgent.registration" -}}
{{- $registration := dig "registration" "registrar" .Values.nodeAgent | toString -}}
{{- if not (has $registration (list "registrar" "builtin")) -}}
{{- fail (printf "nodeAgent.registration is %q; set it to registrar (upstream's node-driver-registrar sidecar, the default) or builtin (the node agent registers itself, for nodes that cannot pull the registrar image)" $registration) -}}
{{- end -}}
{{- $registration -}}
{{- end -}}
