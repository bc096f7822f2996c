//! Local processes for containers: the command line rewritten onto the
//! pod's directory, spawning in a process group with the log as output,
//! waiting for the exit and its termination message, and killing with
//! SIGTERM then SIGKILL. Only this module touches the operating system's
//! processes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Ctr, Internal, PodRun, State, expand_vars, log_path, replace_paths};
use crate::meta;

impl PodRun {
    /// Resolves the environment and spawns one container instance.
    pub(super) async fn start(&mut self, idx: usize) {
        let spec = self.ctrs[idx].spec.clone();
        let prepared = match self.resolve_env(&spec).await {
            Ok(env) => self.fill_volumes(&spec).await.map(|()| env),
            Err(e) => Err(e),
        };
        let env = match prepared {
            Ok(env) => env,
            Err(msg) => {
                self.ctrs[idx].state =
                    State::Waiting("CreateContainerConfigError".into(), msg.clone());
                self.write_status().await;
                self.event(
                    "Failed",
                    &format!("Error: {msg}"),
                    Some(&self.ctrs[idx].name.clone()),
                )
                .await;
                let tx = self.tx.clone();
                let delay = self.cfg.restart_backoff.max(Duration::from_millis(200));
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(Internal::Start(idx));
                });
                return;
            }
        };
        let c = &self.ctrs[idx];
        let policy = c.spec["terminationMessagePolicy"]
            .as_str()
            .unwrap_or("File")
            .to_string();
        let tm_file = self.dir.join(format!("{}.termination-log", c.name));
        let _ = std::fs::remove_file(&tm_file);
        let mut subst: Vec<(String, String)> = Vec::new();
        let tm_path = c.spec["terminationMessagePath"]
            .as_str()
            .unwrap_or("/dev/termination-log");
        subst.push((tm_path.to_string(), tm_file.display().to_string()));
        for m in c.spec["volumeMounts"].as_array().into_iter().flatten() {
            let (Some(mp), Some(vol)) = (m["mountPath"].as_str(), m["name"].as_str()) else {
                continue;
            };
            let vdir = self.dir.join("volumes").join(vol);
            let _ = std::fs::create_dir_all(&vdir);
            subst.push((mp.to_string(), vdir.display().to_string()));
        }
        subst.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        let rewrite = |s: &str| -> String { replace_paths(&expand_vars(s, &env), &subst) };
        let mut argv: Vec<String> = c.spec["command"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(c.spec["args"].as_array().into_iter().flatten())
            .filter_map(|v| v.as_str())
            .map(rewrite)
            .collect();
        let log = log_path(&self.dir, &c.name, c.restarts);
        let started = meta::now();
        if argv.is_empty() {
            // No image entrypoint to fall back on.
            argv = vec![];
        }
        let spawned = if argv.is_empty() {
            Err("the container has no command or args; the node cannot run an image's default entrypoint (images are not pulled)".to_string())
        } else {
            spawn(&argv, &env, c, &self.dir, &log, &tm_file)
        };
        match spawned {
            Ok(child) => {
                let pid = child.id().map(|p| p as i32).unwrap_or(0);
                self.host
                    .live_logs()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(log.clone());
                self.ctrs[idx].state = State::Running {
                    pid,
                    started: started.clone(),
                };
                let tx = self.tx.clone();
                let host = self.host.clone();
                tokio::spawn(async move {
                    let code = wait(child).await;
                    let message = termination_message(&tm_file, &log, code, &policy);
                    host.live_logs()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&log);
                    let _ = tx.send(Internal::Exited {
                        idx,
                        code,
                        message,
                        started,
                    });
                });
                let name = self.ctrs[idx].name.clone();
                self.event(
                    "Started",
                    &format!("Started container {name} (local process {pid})"),
                    Some(&name),
                )
                .await;
            }
            Err(msg) => {
                let _ = std::fs::write(&log, format!("{msg}\n"));
                let _ = self.tx.send(Internal::Exited {
                    idx,
                    code: 128,
                    message: msg,
                    started,
                });
                self.ctrs[idx].state = State::Running {
                    pid: 0,
                    started: meta::now(),
                };
            }
        }
        if self.ctrs[idx].init {
            self.phase = "Pending".into();
        }
        self.write_status().await;
    }

    /// SIGTERM to every running container's process group, SIGKILL after
    /// `grace`; records how each ended.
    pub(super) async fn kill_all(&mut self, grace: Duration) {
        let running: Vec<(usize, i32)> = self
            .ctrs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c.state {
                State::Running { pid, .. } if pid > 0 => Some((i, pid)),
                _ => None,
            })
            .collect();
        for c in self.ctrs.iter_mut() {
            c.done = true;
        }
        let sig = if grace.is_zero() {
            nix::sys::signal::Signal::SIGKILL
        } else {
            nix::sys::signal::Signal::SIGTERM
        };
        for (_, pid) in &running {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(*pid), sig);
        }
        let mut left: Vec<usize> = running.iter().map(|(i, _)| *i).collect();
        let until = Instant::now() + grace;
        let mut killed = grace.is_zero();
        while !left.is_empty() {
            let wait = until.saturating_duration_since(Instant::now());
            let msg = if killed {
                tokio::time::timeout(Duration::from_secs(5), self.rx.recv()).await
            } else {
                tokio::time::timeout(wait, self.rx.recv()).await
            };
            match msg {
                Ok(Some(Internal::Exited {
                    idx,
                    code,
                    message,
                    started,
                })) => {
                    left.retain(|i| *i != idx);
                    let c = &mut self.ctrs[idx];
                    let mut t = json!({"exitCode": code, "reason": "Error", "startedAt": started, "finishedAt": meta::now()});
                    if !message.is_empty() {
                        t["message"] = message.into();
                    }
                    c.state = State::Terminated(t);
                }
                Ok(Some(Internal::Start(_))) => {}
                Ok(None) => break,
                Err(_) if !killed => {
                    for (i, pid) in &running {
                        if left.contains(i) {
                            let _ = nix::sys::signal::killpg(
                                nix::unistd::Pid::from_raw(*pid),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                        }
                    }
                    killed = true;
                }
                Err(_) => break,
            }
        }
        // Containers waiting for a restart never run again.
        for c in self.ctrs.iter_mut() {
            if let State::Waiting(..) = c.state {
                c.state = State::Terminated(
                    json!({"exitCode": 0, "reason": "Completed", "finishedAt": meta::now()}),
                );
            }
        }
    }
}

fn spawn(
    argv: &[String],
    env: &[(String, String)],
    c: &Ctr,
    pod_dir: &Path,
    log: &Path,
    _tm: &Path,
) -> Result<tokio::process::Child, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open log {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        .process_group(0)
        .kill_on_drop(false);
    let wd = c.spec["workingDir"]
        .as_str()
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    cmd.current_dir(wd.unwrap_or_else(|| pod_dir.to_path_buf()));
    cmd.spawn().map_err(|e| {
        format!(
            "failed to start container \"{}\": exec: \"{}\": {e}",
            c.name, argv[0]
        )
    })
}

async fn wait(mut child: tokio::process::Child) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match child.wait().await {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)),
        Err(_) => 128,
    }
}

fn termination_message(tm: &Path, log: &Path, code: i32, policy: &str) -> String {
    let mut msg = std::fs::read(tm).unwrap_or_default();
    msg.truncate(4096);
    if msg.is_empty() && code != 0 && policy == "FallbackToLogsOnError" {
        let data = std::fs::read(log).unwrap_or_default();
        let tail: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
        let start = tail.len().saturating_sub(81);
        let mut joined = tail[start..].join(&b'\n');
        if joined.len() > 2048 {
            joined = joined[joined.len() - 2048..].to_vec();
        }
        msg = joined;
    }
    String::from_utf8_lossy(&msg).trim_end().to_string()
}
