//! What the benchmark reads of the machine, from `/proc` (Linux): the CPU
//! time of the worker's own workerd process, any leftover dev servers that
//! would compete with it for the two cores, and the CPU time the hypervisor
//! gave to other machines.
//!
//! Requests per second move up to ±25% between runs on these shared
//! machines; the worker process's CPU time per request moves far less, and
//! it leaves out what the dev setup adds (wrangler's proxy worker, Node.js
//! printing log lines), which production does not have.

use std::fs;

struct Process {
    pid: u32,
    group: u32,
    name: String,
    command: String,
}

fn processes() -> Vec<Process> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
            // The name is in parentheses and may hold spaces; fields follow.
            let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let group = rest.split(' ').nth(2)?.parse().ok()?;
            let command = fs::read(entry.path().join("cmdline")).ok()?;
            Some(Process {
                pid,
                group,
                name: name.to_string(),
                command: String::from_utf8_lossy(&command).replace('\0', " "),
            })
        })
        .collect()
}

fn is_dev_server(process: &Process) -> bool {
    process.name == "workerd"
        || process.name == "esbuild"
        || process.command.contains("wrangler")
        || process.command.contains("start-worker.mjs")
}

/// Dev servers already running before the benchmark starts any: each one
/// takes CPU from the run (a leftover `esbuild --service` alone polls).
pub fn strays() -> Vec<String> {
    let own = std::process::id();
    processes()
        .into_iter()
        // A zombie (an ended process not yet reaped) has no command line
        // and takes no CPU.
        .filter(|process| process.pid != own && !process.command.is_empty())
        .filter(is_dev_server)
        .map(|process| format!("{} {}", process.pid, process.command.trim()))
        .collect()
}

/// The workerd process that runs the worker, in the process group the
/// benchmark started: wrangler starts it on an ephemeral port
/// (`entry=127.0.0.1:0`); the other workerd is wrangler's proxy in front.
pub struct WorkerProcess {
    pid: u32,
    ticks_per_second: f64,
}

/// The workerd process's CPU seconds for the dev server of process group
/// `group`, read at each call; `None` when the process was not found.
pub fn cpu_clock(group: u32) -> impl Fn() -> Option<f64> {
    let worker = WorkerProcess::find(group);
    move || worker.as_ref().and_then(WorkerProcess::cpu_seconds)
}

impl WorkerProcess {
    pub fn find(group: u32) -> Option<WorkerProcess> {
        let pid = processes()
            .into_iter()
            .find(|process| {
                process.group == group
                    && process.name == "workerd"
                    && process.command.contains("entry=127.0.0.1:0")
            })?
            .pid;
        let ticks = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0);
        Some(WorkerProcess {
            pid,
            ticks_per_second: ticks,
        })
    }

    /// CPU seconds the process's threads have used so far, to the
    /// nanosecond (each thread's `schedstat`), or in clock ticks (`stat`,
    /// 10 ms on these machines) where the scheduler's statistics are off.
    /// A thread that has ended no longer counts; workerd keeps its pools.
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.thread_cpu_seconds()
            .or_else(|| self.tick_cpu_seconds())
    }

    fn thread_cpu_seconds(&self) -> Option<f64> {
        let nanoseconds: u64 = self.threads().values().sum();
        (nanoseconds > 0).then(|| nanoseconds as f64 / 1e9)
    }

    /// Each live thread's CPU nanoseconds so far, by thread id.
    pub fn threads(&self) -> std::collections::BTreeMap<u32, u64> {
        let mut threads = std::collections::BTreeMap::new();
        let Ok(tasks) = fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return threads;
        };
        for thread in tasks.flatten() {
            // A thread may end between the listing and the read.
            let Ok(stat) = fs::read_to_string(thread.path().join("schedstat")) else {
                continue;
            };
            let id = thread.file_name().to_str().and_then(|id| id.parse().ok());
            let ns = stat.split(' ').next().and_then(|ns| ns.trim().parse().ok());
            if let (Some(id), Some(ns)) = (id, ns) {
                threads.insert(id, ns);
            }
        }
        threads
    }

    fn tick_cpu_seconds(&self) -> Option<f64> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
        // utime and stime are fields 14 and 15 of stat(5); `fields` starts at 3.
        let user: f64 = fields.get(11)?.parse().ok()?;
        let system: f64 = fields.get(12)?.parse().ok()?;
        Some((user + system) / self.ticks_per_second)
    }
}

/// The machine's CPU time so far, in ticks: all of it, and the part stolen
/// by the hypervisor for other virtual machines (`/proc/stat`).
pub fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    Some((ticks.iter().sum(), *ticks.get(7)?))
}

/// The share of the machine's CPU time stolen between two readings of
/// [`cpu_ticks`].
pub fn stolen_share(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((total_before, stolen_before), (total_after, stolen_after)) = (before?, after?);
    let total = total_after.checked_sub(total_before)?;
    (total > 0).then(|| (stolen_after - stolen_before) as f64 / total as f64)
}
