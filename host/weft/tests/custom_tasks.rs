//! The spark and k8s-resource task plugins end to end: their CRDs installed
//! in the dev cluster, a workflow through the real controller and the real
//! components, and the test playing the operator by patching status.

mod common;

use common::{Env, node, root};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
};
use serde_json::json;
use weft_dag::{NodePhase, WorkflowPhase};

async fn install_crd(env: &Env, crd: CustomResourceDefinition) {
    let api: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    api.create(&PostParams::default(), &crd)
        .await
        .expect("install CRD");
}

fn objects(env: &Env, gvk: &GroupVersionKind, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(gvk, plural);
    Api::namespaced_with(env.client.clone(), "default", &ar)
}

/// Waits for the task's resource to appear and returns its name.
async fn created(api: &Api<DynamicObject>, workflow: &str) -> String {
    for _ in 0..300 {
        let list = api
            .list(&ListParams::default().labels(&format!("weft.dev/workflow={workflow}")))
            .await
            .unwrap();
        if let Some(o) = list.items.first() {
            return o.metadata.name.clone().unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no resource for workflow {workflow}");
}

/// The operator's move: a status.
async fn set_status(api: &Api<DynamicObject>, name: &str, status: serde_json::Value) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await
    .expect("patch status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spark_application_runs_as_the_operator_reports_it() {
    let env = Env::start().await;
    let text = std::fs::read_to_string(
        root().join("tests/fixtures/crds/sparkoperator.k8s.io_sparkapplications.yaml"),
    )
    .unwrap();
    install_crd(&env, serde_yaml::from_str(&text).unwrap()).await;
    let gvk = GroupVersionKind::gvk("sparkoperator.k8s.io", "v1beta2", "SparkApplication");
    let apps = objects(&env, &gvk, "sparkapplications");

    for (wf, last_state, want) in [
        ("spark-ok", "COMPLETED", WorkflowPhase::Succeeded),
        ("spark-bad", "FAILED", WorkflowPhase::Failed),
    ] {
        env.submit(
            wf,
            r#"
nodes:
  - id: pi
    inputs: {partitions: 10}
    task:
      type: spark
      config:
        type: Scala
        image: docker.io/apache/spark:4.0.4
        mainClass: org.apache.spark.examples.SparkPi
        mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
        sparkVersion: 4.0.4
        driver: {cores: 1, memory: 512m}
        executor: {cores: 1, instances: 2, memory: 512m}
"#,
        )
        .await;
        let name = created(&apps, wf).await;
        let app = apps.get(&name).await.unwrap();
        assert_eq!(
            app.data["spec"]["mainClass"],
            "org.apache.spark.examples.SparkPi"
        );
        set_status(
            &apps,
            &name,
            json!({"applicationState": {"state": "RUNNING"}, "sparkApplicationId": "spark-123",
                   "driverInfo": {"podName": format!("{name}-driver"), "webUIAddress": "10.0.0.1:4040"}}),
        )
        .await;
        env.wait_for(wf, 30, |w| {
            w.status
                .as_ref()
                .and_then(|s| s.nodes.get("pi"))
                .is_some_and(|n| n.phase == NodePhase::Running && !n.log_links.is_empty())
        })
        .await;
        set_status(
            &apps,
            &name,
            json!({"applicationState": {"state": last_state, "errorMessage": "driver exited 1"}}),
        )
        .await;
        let done = env.finish(wf, 60).await;
        assert_eq!(done.status.as_ref().unwrap().phase, want, "{wf}");
        if want == WorkflowPhase::Failed {
            let msg = node(&done, "pi").message.clone().unwrap_or_default();
            assert!(msg.contains("driver exited 1"), "{msg}");
        }
    }
    env.stop().await;
}

/// A PyTorchJob CRD as Kubeflow's training operator installs it (schema
/// left open: the dev cluster stores what it is given).
fn pytorchjob_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "pytorchjobs.kubeflow.org"},
        "spec": {
            "group": "kubeflow.org",
            "scope": "Namespaced",
            "names": {"kind": "PyTorchJob", "plural": "pytorchjobs", "singular": "pytorchjob", "listKind": "PyTorchJobList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_custom_resource_runs_through_k8s_resource_with_cel_conditions() {
    let env = Env::start().await;
    install_crd(&env, pytorchjob_crd()).await;
    let gvk = GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob");
    let jobs = objects(&env, &gvk, "pytorchjobs");
    let spec = r#"
inputs: {epochs: 3}
nodes:
  - id: train
    inputs: {epochs: "${inputs.epochs}"}
    task:
      type: k8s-resource
      config:
        manifest:
          apiVersion: kubeflow.org/v1
          kind: PyTorchJob
          spec:
            pytorchReplicaSpecs:
              Master:
                replicas: 1
                template:
                  spec:
                    containers:
                      - name: pytorch
                        image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
                        args: ["--epochs=${inputs.epochs}"]
        successCondition: "object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')"
        failureCondition: "object.status.conditions.exists(c, c.type == 'Failed' && c.status == 'True')"
        outputs:
          completedAt: object.status.completionTime
          replicas: object.status.replicaStatuses.Master.succeeded
"#;
    for (wf, condition, want) in [
        ("torch-ok", "Succeeded", WorkflowPhase::Succeeded),
        ("torch-bad", "Failed", WorkflowPhase::Failed),
    ] {
        env.submit(wf, spec).await;
        let name = created(&jobs, wf).await;
        let job = jobs.get(&name).await.unwrap();
        assert_eq!(
            job.data["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
                ["args"][0],
            "--epochs=3",
            "inputs substituted"
        );
        set_status(
            &jobs,
            &name,
            json!({"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}),
        )
        .await;
        env.wait_for(wf, 30, |w| {
            w.status
                .as_ref()
                .and_then(|s| s.nodes.get("train"))
                .is_some_and(|n| n.phase == NodePhase::Running)
        })
        .await;
        set_status(
            &jobs,
            &name,
            json!({"conditions": [{"type": "Running", "status": "False"}, {"type": condition, "status": "True"}],
                   "completionTime": "2026-11-23T10:00:00Z",
                   "replicaStatuses": {"Master": {"succeeded": 1}}}),
        )
        .await;
        let done = env.finish(wf, 60).await;
        assert_eq!(done.status.as_ref().unwrap().phase, want, "{wf}");
        if want == WorkflowPhase::Succeeded {
            let outputs = node(&done, "train").outputs.clone().unwrap();
            assert_eq!(outputs["completedAt"], "2026-11-23T10:00:00Z");
            assert_eq!(outputs["replicas"], 1);
        }
    }
    env.stop().await;
}
