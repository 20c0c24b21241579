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

mod counting {
    scion_store::conformance_tests!(std::sync::Arc::new(scion_store::CountingBackend::new(
        std::sync::Arc::new(scion_store::MemoryBackend::new())
    )));
}

mod segment_cache {
    fn fresh() -> std::sync::Arc<dyn scion_store::Backend> {
        let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
        let inner =
            std::sync::Arc::new(scion_store::LocalBackend::open(dir.path().join("store")).unwrap());
        std::sync::Arc::new(
            scion_store::SegmentCache::new(inner, dir.path().join("cache"), "").unwrap(),
        )
    }
    scion_store::conformance_tests!(fresh());
}
