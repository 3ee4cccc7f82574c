package helmchart_test

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

// TestNoticesRender: by default the exporters notify the remediator directly (remediator.notices):
// each sends its ServiceAccount token projected for the remediator's audience to the
// remediator's Service, the remediator accepts that ServiceAccount alone and may review tokens,
// and the NetworkPolicy admits the exporter pods to its port. Turned off, or with a web config
// on the remediator (which would refuse them), or without a remediator, none of it is rendered.
func TestNoticesRender(t *testing.T) {
	const tokenDir = "/var/run/secrets/emptydir-remediator"
	tests := []struct {
		name   string
		values string
		on     bool
	}{
		{"default", "{}", true},
		{"another audience", "remediator: {notices: {audience: guard-notices}}", true},
		{"turned off", "remediator: {notices: {enabled: false}}", false},
		{"remediator web config", "remediator: {webConfig: {basic_auth_users: {am: x}}}", false},
		{"no remediator", "remediator: {enabled: false}", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tt.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			out := render(t, r)
			audience := "emptydir-remediator"
			if tt.name == "another audience" {
				audience = "guard-notices"
			}
			spec := deploytest.ExporterDaemonSet(t, out.objs, "guard-emptydir-exporter").Spec.Template.Spec
			args := spec.Containers[0].Args
			urls, files := deploytest.ArgValues(args, "remediator.url"), deploytest.ArgValues(args, "remediator.token-file")
			m, v := mountAt(spec, tokenDir)
			if !tt.on {
				if len(urls)+len(files) != 0 || m != nil {
					t.Errorf("exporter: --remediator.url %v, --remediator.token-file %v, token mount %+v: want none", urls, files, m)
				}
				if out.allowedAnywhere("guard-emptydir-remediator", deploytest.Perm("", "authentication.k8s.io", "tokenreviews", "create")) {
					t.Error("the remediator may create TokenReviews without notices")
				}
				return
			}
			if len(urls) != 1 || urls[0] != "http://guard-emptydir-remediator.guard.svc:9732" || len(files) != 1 || files[0] != tokenDir+"/token" {
				t.Errorf("exporter: --remediator.url %v, --remediator.token-file %v", urls, files)
			}
			if m == nil || !m.ReadOnly || v == nil || v.Projected == nil || len(v.Projected.Sources) != 1 {
				t.Fatalf("exporter: at %s mount %+v of volume %+v, want a read-only projected token alone", tokenDir, m, v)
			}
			tok := v.Projected.Sources[0].ServiceAccountToken
			if tok == nil || tok.Audience != audience || tok.Path != "token" || tok.ExpirationSeconds == nil || *tok.ExpirationSeconds > 3600 {
				t.Errorf("projected token %+v: want audience %s at token, at most an hour", tok, audience)
			}
			rem := deploytest.RemediatorDeployment(t, out.objs, "guard-emptydir-remediator").Spec.Template.Spec.Containers[0]
			wantArgs(t, "remediator", rem.Args, "--notice.service-account=guard/guard-emptydir-exporter", "--notice.audience="+audience)
			if spec.ServiceAccountName != "guard-emptydir-exporter" {
				t.Errorf("exporter ServiceAccount %q, the remediator accepts guard-emptydir-exporter", spec.ServiceAccountName)
			}
			if !out.allowedAnywhere("guard-emptydir-remediator", deploytest.Perm("", "authentication.k8s.io", "tokenreviews", "create")) {
				t.Error("the remediator may not create TokenReviews")
			}
			exporterPod := deploytest.Endpoint{Namespace: "guard", Labels: deploytest.ExporterDaemonSet(t, out.objs, "guard-emptydir-exporter").Spec.Template.Labels}
			remPod := deploytest.Endpoint{Namespace: "guard", Labels: deploytest.RemediatorDeployment(t, out.objs, "guard-emptydir-remediator").Spec.Template.Labels}
			port, _ := deploytest.NamedPort(rem, "http")
			if !deploytest.Admits(t, deploytest.All[*networkingv1.NetworkPolicy](out.objs), exporterPod, remPod, rem, port) {
				t.Error("the NetworkPolicy does not admit the exporters to the remediator")
			}
		})
	}
}
