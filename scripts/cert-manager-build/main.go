// Command cert-manager runs the parts of cert-manager the chart's cert-manager TLS mode relies
// on, in one process outside the cluster: the Certificate controllers, the issuers controller,
// the CertificateRequest approver, the selfSigned and CA signers, and CA injection into
// webhook configurations (cainjector's reconcilers).
//
// cert-manager publishes its libraries as one module on the Go module proxy, but not the
// modules of its commands (cmd/controller, cmd/cainjector), so this wrapper is the command:
// it builds the same controllers from the published packages and runs them against the API
// server of --kubeconfig.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Each controller registers itself with controllerpkg.Known() when imported.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// The issuer kinds, which register themselves the same way when imported.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the loops run, by their registered names.
var controllers = []string{
	"issuers",
	"clusterissuers",
	"certificaterequests-approver",
	"certificaterequests-issuer-selfsigned",
	"certificaterequests-issuer-ca",
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
}

func main() {
	// a flag set of its own: controller-runtime registers --kubeconfig on the global one
	flags := flag.NewFlagSet("cert-manager", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the API server to reconcile against")
	clusterNamespace := flags.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets ClusterIssuers refer to")
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager: --kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctrl.SetLogger(zap.New())
	ctx = logf.NewContext(ctx, ctrl.Log.WithName("cert-manager"))
	if err := run(ctx, *kubeconfig, *clusterNamespace); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNamespace string) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:    kubeconfig,
		IssuerOptions: controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterNamespace},
	})
	if err != nil {
		return err
	}
	var loops []controllerpkg.Interface
	for _, name := range controllers {
		build, ok := controllerpkg.Known()[name]
		if !ok {
			return fmt.Errorf("no controller registered as %q", name)
		}
		loop, err := build(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		loops = append(loops, loop)
	}
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())

	manager, err := injector(ctx, kubeconfig)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(loops)+1)
	for _, loop := range loops {
		wg.Add(1)
		go func(loop controllerpkg.Interface) {
			defer wg.Done()
			if err := loop.Run(2, ctx); err != nil {
				errs <- err
			}
		}(loop)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := manager.Start(ctx); err != nil {
			errs <- err
		}
	}()
	fmt.Fprintln(os.Stderr, "cert-manager: controllers and CA injection running")
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	wg.Wait()
	return nil
}

// injector is cainjector's reconcilers for webhook configurations, in a controller-runtime
// manager of their own (no metrics or health listener, no leader election: one process).
func injector(ctx context.Context, kubeconfig string) (ctrl.Manager, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// the reconcilers apply with the user agent's prefix as their field manager
	config = util.RestConfigWithUserAgent(config, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	err = cainjector.RegisterAllInjectors(ctx, manager, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	})
	return manager, err
}
