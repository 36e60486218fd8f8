//! Everything the library logs during a test, as text: for checks that a secret never reaches
//! a log line and that a warning was given.

use std::sync::{Arc, Mutex, PoisonError};

use tracing::subscriber::DefaultGuard;

/// A tracing subscriber that keeps every line written, at every level, while it is the
/// thread's default.
///
/// ```
/// use redlock_testkit::CapturedLogs;
/// let logs = CapturedLogs::default();
/// let _guard = logs.capture();
/// tracing::warn!(node = "redis://:***@host:6379", "a lock node does not answer");
/// assert!(logs.text().contains("does not answer"));
/// ```
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Makes the capture the current thread's subscriber until the guard is dropped. A test on
    /// a current-thread runtime sees every line its tasks write.
    pub fn capture(&self) -> DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer({
                let logs = self.clone();
                move || logs.clone()
            })
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
