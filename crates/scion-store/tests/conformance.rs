//! Every backend in this crate passes the same conformance suite.

mod memory {
    scion_store::conformance_tests!(std::sync::Arc::new(scion_store::MemoryBackend::new()));
}

mod local {
    fn fresh() -> std::sync::Arc<dyn scion_store::Backend> {
        // The directory must outlive the backend; leak it for the test's lifetime.
        let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
        std::sync::Arc::new(scion_store::LocalBackend::open(dir.path()).unwrap())
    }
    scion_store::conformance_tests!(fresh());
}

mod faulty_passthrough {
    scion_store::conformance_tests!(std::sync::Arc::new(scion_store::FaultyBackend::new(
        std::sync::Arc::new(scion_store::MemoryBackend::new()),
        scion_store::FaultPlan::None
    )));
}
