//! Compiling a plugin in a child process.
//!
//! Cranelift's working memory while it compiles a component is far larger
//! than the component it leaves: the k8s-resource plugin (2 MB) peaks at
//! 125 MiB of resident memory, the pod plugin at 45 MiB (release builds,
//! `weft plugin inspect`). Compiled in the controller, that peak stays in
//! its high-water mark and in pages the allocator keeps; compiled in a
//! child, the controller only ever holds the artifact it deserializes.
//! The `weft` binary is its own compiler (`weft plugin compile-artifact`:
//! a component on stdin, wasmtime's artifact on stdout), so the artifact
//! comes from the same wasmtime with the same settings.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The exit code with which a compiler child says the component itself
/// was refused (its reason on stderr), as opposed to the child failing.
pub const REFUSED: i32 = 3;

/// A program that compiles a component read on stdin to a wasmtime
/// artifact (`Component::serialize` of the engine's compile settings) on
/// stdout, exiting [`REFUSED`] with the reason on stderr when the
/// component does not compile.
#[derive(Debug, Clone)]
pub struct ChildCompiler {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

/// What became of a compile in a child.
#[derive(Debug)]
pub enum ChildOutcome {
    /// The artifact.
    Compiled(Vec<u8>),
    /// The component does not compile: the compiler's reason.
    Refused(String),
    /// The child could not do it (not started, killed, another exit): the
    /// caller compiles in its own process instead.
    Failed(String),
}

impl ChildCompiler {
    /// `weft plugin compile-artifact` of the running executable, when it
    /// can be found.
    pub fn this_weft() -> Option<ChildCompiler> {
        let program = std::env::current_exe().ok()?;
        Some(ChildCompiler {
            program,
            args: vec!["plugin".into(), "compile-artifact".into()],
        })
    }

    /// Compiles `bytes` in a child process.
    pub fn compile(&self, bytes: &[u8]) -> ChildOutcome {
        let shown = self.program.display();
        let child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return ChildOutcome::Failed(format!("cannot start {shown}: {e}")),
        };
        // Written from a thread of its own: the child may write while it
        // still reads (its logs on stderr), and a full pipe both ways
        // would stall both processes.
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = bytes.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out = match child.wait_with_output() {
            Ok(o) => o,
            Err(e) => return ChildOutcome::Failed(format!("{shown}: {e}")),
        };
        let written = writer.join();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        match out.status.code() {
            Some(0) if matches!(written, Ok(Ok(()))) => ChildOutcome::Compiled(out.stdout),
            Some(REFUSED) => ChildOutcome::Refused(stderr),
            _ => ChildOutcome::Failed(format!("{shown} ended {}: {stderr}", out.status)),
        }
    }
}
