// Derived from flytepropeller@v1.16.8/cmd/controller/main.go, but registers only the
// k8s pod plugin (container/sidecar task types) instead of flytepropeller/plugins, whose
// spark plugin needs github.com/kubeflow/spark-operator@v0.0.0-20250325114751-1905be6e1dbd,
// a version the module proxy here refuses (403).
package main

import (
	"github.com/flyteorg/flyte/flytepropeller/cmd/controller/cmd"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/pod"
)

func main() {
	cmd.Execute()
}
