package deploytest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Endpoint is one side of a connection as NetworkPolicy sees it.
type Endpoint struct {
	Namespace       string
	NamespaceLabels labels.Set // besides kubernetes.io/metadata.name, which every namespace has
	Labels          labels.Set
}

// nsLabels are the namespace's labels, with the one the API server gives every namespace.
func (e Endpoint) nsLabels() labels.Set {
	return labels.Merge(e.NamespaceLabels, labels.Set{"kubernetes.io/metadata.name": e.Namespace})
}

// Admits evaluates networking.k8s.io/v1 ingress semantics over policies for a TCP connection
// from src to port of dst (whose container is c): a pod no Ingress policy selects takes all
// traffic; a selected pod takes what at least one rule of one selecting policy allows.
func Admits(t testing.TB, policies []*networkingv1.NetworkPolicy, src, dst Endpoint, c corev1.Container, port int32) bool {
	t.Helper()
	selector := func(ls *metav1.LabelSelector) labels.Selector {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatalf("selector %v: %v", ls, err)
		}
		return s
	}
	isolated := false
	for _, np := range policies {
		if np.Namespace != dst.Namespace || !selector(&np.Spec.PodSelector).Matches(dst.Labels) {
			continue
		}
		ingressType := false
		for _, pt := range np.Spec.PolicyTypes {
			ingressType = ingressType || pt == networkingv1.PolicyTypeIngress
		}
		if !ingressType {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			peerOK := len(rule.From) == 0
			for _, peer := range rule.From {
				if peer.IPBlock != nil {
					t.Fatalf("%s: ipBlock peers are not evaluated here", np.Name)
				}
				nsOK := peer.NamespaceSelector == nil && src.Namespace == np.Namespace ||
					peer.NamespaceSelector != nil && selector(peer.NamespaceSelector).Matches(src.nsLabels())
				podOK := peer.PodSelector == nil || selector(peer.PodSelector).Matches(src.Labels)
				peerOK = peerOK || nsOK && podOK
			}
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
					continue
				}
				switch {
				case p.Port == nil:
					portOK = true
				case p.Port.StrVal != "":
					n, ok := NamedPort(c, p.Port.StrVal)
					if !ok {
						t.Errorf("%s: port name %q is not a port of container %s", np.Name, p.Port.StrVal, c.Name)
					}
					portOK = portOK || ok && n == port
				default:
					portOK = portOK || p.Port.IntVal == port
				}
			}
			if peerOK && portOK {
				return true
			}
		}
	}
	return !isolated
}

// NamedPort is the number of container c's port called name.
func NamedPort(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}
