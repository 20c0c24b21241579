//! Every backend in this crate passes the same conformance suite.

mod memory {
    scion_store::conformance_tests!(std::sync::Arc::new(scion_store::MemoryBackend::new()));
}

mod local {
    /// The backend, and its directory: removed when the test ends.
    fn fresh() -> (std::sync::Arc<dyn scion_store::Backend>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let backend = std::sync::Arc::new(scion_store::LocalBackend::open(dir.path()).unwrap());
        (backend, dir)
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
    /// The backend, and the directory of its store and cache: removed when the test ends.
    fn fresh() -> (std::sync::Arc<dyn scion_store::Backend>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let inner =
            std::sync::Arc::new(scion_store::LocalBackend::open(dir.path().join("store")).unwrap());
        let backend = std::sync::Arc::new(
            scion_store::SegmentCache::new(inner, dir.path().join("cache"), "").unwrap(),
        );
        (backend, dir)
    }
    scion_store::conformance_tests!(fresh());
}
