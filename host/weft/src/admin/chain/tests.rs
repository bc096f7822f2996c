use super::*;

fn chain() -> Chain {
    Chain::new(
        Arc::new(Registry::default()),
        Selection::Slot,
        Arc::new(Metrics::default()),
    )
}

#[tokio::test]
async fn a_panicking_handler_answers_internal_and_the_next_call_works() {
    let chain = chain();
    let err = chain
        .call("/t/Panic", Request::new(()), |_, ()| async {
            if true {
                panic!("boom");
            }
            Ok(())
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(err.message().contains("/t/Panic"), "{}", err.message());
    assert!(err.metadata().get(REQUEST_ID).is_some());
    let ok = chain
        .call("/t/Fine", Request::new(()), |_, ()| async { Ok(7) })
        .await
        .unwrap();
    assert_eq!(*ok.get_ref(), 7);
    let text = chain.metrics.render();
    assert!(
        text.contains(r#"weft_grpc_requests_total{method="/t/Panic",code="INTERNAL"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn request_ids_are_kept_or_made_and_reserved_keys_are_dropped() {
    let chain = chain();
    let mut req = Request::new(());
    req.metadata_mut()
        .insert(REQUEST_ID, "client-id-1".parse().unwrap());
    req.metadata_mut()
        .insert(PRINCIPAL, "root".parse().unwrap());
    let resp = chain
        .call("/t/Echo", req, |caller, ()| async move { Ok(caller) })
        .await
        .unwrap();
    assert_eq!(resp.get_ref().request_id, "client-id-1");
    assert_eq!(
        resp.get_ref().principal,
        None,
        "clients cannot claim a principal"
    );
    assert_eq!(resp.metadata().get(REQUEST_ID).unwrap(), "client-id-1");

    let a = chain
        .call("/t/Echo", Request::new(()), |c, ()| async move { Ok(c) })
        .await
        .unwrap();
    let b = chain
        .call("/t/Echo", Request::new(()), |c, ()| async move { Ok(c) })
        .await
        .unwrap();
    assert_eq!(a.get_ref().request_id.len(), 16);
    assert_ne!(a.get_ref().request_id, b.get_ref().request_id);
}

#[tokio::test]
async fn a_named_middleware_that_is_not_loaded_fails_closed() {
    let chain = Chain::new(
        Arc::new(Registry::default()),
        Selection::Named(vec!["auth-token".into()]),
        Arc::new(Metrics::default()),
    );
    let err = chain
        .call("/t/X", Request::new(()), |_, ()| async { Ok(()) })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.message().contains("auth-token"), "{}", err.message());
}
