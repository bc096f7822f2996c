//! Task nodes: one task, run through the plugin that serves its type.

use std::collections::HashSet;

use crate::compile::{CheckContext, Problems};
use crate::spec::{MountAs, NodeSpec, SecretRef, TaskSpec};

/// Checks a task (of a task node or an array node's items); `at` is its
/// field path (`task` or `array.task`).
pub fn check_task(n: &NodeSpec, t: &TaskSpec, at: &str, cx: &CheckContext<'_>, p: &mut Problems) {
    let id = Some(n.id.as_str());
    for (i, why) in secret_problems(&t.secrets) {
        p.add(id, &format!("{at}.secrets[{i}]"), why);
    }
    let field = format!("{at}.type");
    if t.task_type.is_empty() {
        p.add(id, &field, "is empty");
    } else if !(cx.known_task_type)(&t.task_type) {
        p.add(
            id,
            &field,
            format!("no plugin serves task type {:?}", t.task_type),
        );
    }
}

/// What is wrong with a task's secrets, by index: Secret names are DNS
/// subdomains, keys what a Secret's data allows, variables C identifiers,
/// and no variable or file is given twice.
pub(crate) fn secret_problems(secrets: &[SecretRef]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut targets = HashSet::new();
    for (i, s) in secrets.iter().enumerate() {
        let subdomain = !s.name.is_empty()
            && s.name.len() <= 253
            && s.name.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !subdomain {
            out.push((i, format!("name {:?} is not a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.')", s.name)));
        }
        let key_ok = !s.key.is_empty()
            && s.key.len() <= 253
            && s.key != "."
            && s.key != ".."
            && s.key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
        if !key_ok {
            out.push((
                i,
                format!(
                    "key {:?} is not a Secret key (letters, digits, '-', '_' and '.')",
                    s.key
                ),
            ));
        }
        let target = match s.mount_as {
            MountAs::Env => {
                let var = s.env_var();
                let ident = var
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ident {
                    out.push((i, format!("envName {var:?} is not a variable name (letters, digits and '_', not starting with a digit)")));
                }
                format!("environment variable {var}")
            }
            MountAs::File => {
                if s.env_name.is_some() {
                    out.push((i, "envName is for mountAs: env; a file secret is at /etc/weft/secrets/NAME/KEY".into()));
                }
                format!("file {}", s.file_path())
            }
        };
        if !targets.insert(target.clone()) {
            out.push((i, format!("the {target} is given twice")));
        }
    }
    out
}
