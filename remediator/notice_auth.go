package remediator

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// How long a TokenReview's answer is kept: a projected token lives an hour or more, so a
// minute costs the API server one review per exporter a minute; a refusal is kept shorter, so
// that a token the API server did not know yet (just issued) is soon asked about again.
const (
	reviewAcceptedTTL = time.Minute
	reviewRefusedTTL  = 10 * time.Second
	// reviewsKept bounds the answers kept (one token per exporter pod, a few while they rotate).
	reviewsKept = 4096
	// reviewsPerSecond and reviewBurst bound the TokenReviews of tokens not kept: the exporters
	// need one each a minute, a caller posting made-up tokens would otherwise have the API
	// server review each.
	reviewsPerSecond = 5
	reviewBurst      = 50
)

// nodeNameExtra is the TokenReview extra that names the node of the pod a ServiceAccount token
// was issued to (ServiceAccountTokenPodNodeInfo): a notice's node must be that one.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// errReviewUnavailable is a TokenReview that could not be made: nothing is known of the caller.
var errReviewUnavailable = errors.New("token review unavailable")

// errReviewLimited is a TokenReview not made: reviewsPerSecond were made already.
var errReviewLimited = errors.New("too many token reviews")

// caller is what a TokenReview said of a bearer token.
type caller struct {
	// authenticated: the token is valid and issued for the audience.
	authenticated bool
	user          string
	// node is the node of the pod the token was issued to; "" when the API server does not say.
	node string
}

// tokenReviewer authenticates bearer tokens with TokenReviews for one audience, keeping the
// answers briefly by the token's hash.
type tokenReviewer struct {
	client   kubernetes.Interface
	audience string
	now      func() time.Time

	limit *rate.Limiter

	mu      sync.Mutex
	answers map[[sha256.Size]byte]reviewAnswer
}

type reviewAnswer struct {
	caller caller
	until  time.Time
}

func newTokenReviewer(client kubernetes.Interface, audience string, now func() time.Time) *tokenReviewer {
	return &tokenReviewer{client: client, audience: audience, now: now, answers: map[[sha256.Size]byte]reviewAnswer{},
		limit: rate.NewLimiter(reviewsPerSecond, reviewBurst)}
}

// review says who token is, from the kept answer or a new TokenReview. An error is a review
// that could not be made (errReviewUnavailable): not kept, the caller may try again.
func (r *tokenReviewer) review(ctx context.Context, token string) (caller, error) {
	key := sha256.Sum256([]byte(token))
	now := r.now()
	r.mu.Lock()
	a, ok := r.answers[key]
	r.mu.Unlock()
	if ok && now.Before(a.until) {
		return a.caller, nil
	}
	if !r.limit.AllowN(now, 1) {
		return caller{}, errReviewLimited
	}
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return caller{}, fmt.Errorf("%w: %w", errReviewUnavailable, err)
	}
	st := tr.Status
	// The API server answers with the audiences of the request the token is valid for; an
	// answer without ours (an authenticator that ignores audiences) is no proof.
	c := caller{authenticated: st.Authenticated && st.Error == "" && slices.Contains(st.Audiences, r.audience)}
	if c.authenticated {
		c.user = st.User.Username
		if nodes := st.User.Extra[nodeNameExtra]; len(nodes) == 1 {
			c.node = nodes[0]
		}
	}
	ttl := reviewRefusedTTL
	if c.authenticated {
		ttl = reviewAcceptedTTL
	}
	r.keep(key, reviewAnswer{caller: c, until: now.Add(ttl)})
	return c, nil
}

// keep stores an answer, first forgetting the expired ones when reviewsKept are kept, and all
// of them if none has expired: a flood of bad tokens then costs reviews, not memory.
func (r *tokenReviewer) keep(key [sha256.Size]byte, a reviewAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) >= reviewsKept {
		now := r.now()
		for k, old := range r.answers {
			if !now.Before(old.until) {
				delete(r.answers, k)
			}
		}
		if len(r.answers) >= reviewsKept {
			clear(r.answers)
		}
	}
	r.answers[key] = a
}

// serviceAccountUser is the user name of the ServiceAccount "namespace/name" in a TokenReview.
func serviceAccountUser(namespacedName string) string {
	ns, name, _ := strings.Cut(namespacedName, "/")
	return "system:serviceaccount:" + ns + ":" + name
}
