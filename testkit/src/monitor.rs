//! A `MONITOR` session on one server: every command it runs, as text, for tests that must prove
//! a command was (or was not) sent.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::HarnessError;

/// Records the commands a server runs, from the moment [`Monitor::start`] returns.
///
/// Each line is redis-server's own `MONITOR` output, e.g.
/// `+1700000000.123456 [0 127.0.0.1:40000] "EVALSHA" "…" "1" "redlock:job" …`.
#[derive(Debug)]
pub struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl Monitor {
    /// Starts monitoring the server on `127.0.0.1:port` (no password).
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] if the server cannot be reached.
    pub fn start(port: u16) -> Result<Self, HarnessError> {
        let io = |context: &str| {
            let context = context.to_owned();
            move |source| HarnessError::Io { context, source }
        };
        let mut stream =
            TcpStream::connect(("127.0.0.1", port)).map_err(io("cannot connect to MONITOR"))?;
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(io("cannot set a read timeout"))?;
        stream
            .write_all(b"MONITOR\r\n")
            .map_err(io("cannot send MONITOR"))?;
        let mut reader = BufReader::new(stream);
        let mut ok = String::new();
        // The first line is "+OK": from then on, every command is reported.
        while ok.is_empty() {
            match reader.read_line(&mut ok) {
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(err) if err.kind() == std::io::ErrorKind::TimedOut => continue,
                Err(source) => return Err(io("MONITOR did not answer")(source)),
            }
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = std::thread::spawn({
            let (lines, stop) = (Arc::clone(&lines), Arc::clone(&stop));
            move || {
                let mut line = String::new();
                while !stop.load(Ordering::Relaxed) {
                    match reader.read_line(&mut line) {
                        Ok(0) => break,
                        Ok(_) => {
                            lines
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(std::mem::take(&mut line).trim_end().to_owned());
                        }
                        Err(err)
                            if matches!(
                                err.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) => {}
                        Err(_) => break,
                    }
                }
            }
        });
        Ok(Self {
            lines,
            stop,
            reader: Some(reader),
        })
    }

    /// The lines recorded so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How many recorded lines after the first `skip` contain `needle`.
    pub fn count_after(&self, skip: usize, needle: &str) -> usize {
        self.lines()
            .iter()
            .skip(skip)
            .filter(|line| line.contains(needle))
            .count()
    }
}

/// The command of one `MONITOR` line, its name first, each argument unquoted, to send again:
/// `+1700000000.123456 [0 127.0.0.1:40000] "EVALSHA" "ab" "1"` gives `EVALSHA`, `ab`, `1`.
/// `None` for a line that records no command.
pub fn monitored_command(line: &str) -> Option<Vec<Vec<u8>>> {
    let mut bytes = line.get(line.find("] \"")? + 2..)?.bytes();
    let mut args = Vec::new();
    while let Some(quote) = bytes.next() {
        match quote {
            b' ' => continue,
            b'"' => {}
            _ => return None,
        }
        let mut arg = Vec::new();
        loop {
            match bytes.next()? {
                b'"' => break,
                b'\\' => arg.push(match bytes.next()? {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'x' => {
                        let hex = [bytes.next()?, bytes.next()?];
                        u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?
                    }
                    other => other,
                }),
                byte => arg.push(byte),
            }
        }
        args.push(arg);
    }
    (!args.is_empty()).then_some(args)
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::monitored_command;

    #[test]
    fn a_monitored_command_is_unquoted() {
        let line = r#"+1700000000.123456 [0 127.0.0.1:40000] "EVALSHA" "a\"b" "x\x01\\" "1""#;
        let command = monitored_command(line).expect("a command");
        assert_eq!(
            command,
            vec![
                b"EVALSHA".to_vec(),
                b"a\"b".to_vec(),
                b"x\x01\\".to_vec(),
                b"1".to_vec()
            ]
        );
        assert_eq!(monitored_command("+OK"), None);
    }
}
