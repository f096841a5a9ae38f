//! The fuzz entry: bytes decoded into a sequence of transitions (user
//! commands, time passing, faults), run through the simulator with every
//! invariant, then healed and checked for convergence. The cargo-fuzz target
//! in `fuzz/` and the corpus replay test both call [`fuzz_one`].

use crate::faults::FaultKind;
use crate::sim::{RunStats, SimFailure, SimOptions, Transition, UserOp, run_script};

/// At most this many transitions are taken from one input.
pub const TRANSITIONS_MAX: usize = 4000;

/// Decodes fuzz bytes: the first four are the seed of what the script
/// leaves open (latencies, process behaviour), then one transition per
/// opcode byte and its argument bytes. Any input decodes.
pub fn decode(bytes: &[u8]) -> (u64, Vec<Transition>) {
    let mut seed = [0u8; 8];
    let head = bytes.len().min(4);
    seed[..head].copy_from_slice(&bytes[..head]);
    let mut rest = bytes[head..].iter().copied();
    let mut next = move || rest.next();
    let mut out = Vec::new();
    while out.len() < TRANSITIONS_MAX {
        let Some(op) = next() else { break };
        let a = next().unwrap_or(0);
        let t = match op % 16 {
            0..=3 => Transition::Advance(u32::from(a) * u32::from(a) * 2),
            4 => {
                let b = next().unwrap_or(0);
                Transition::User(UserOp::Create {
                    policy: a,
                    auto_remove: b & 0x10 != 0,
                    stop_timeout_s: (b & 1 == 1).then_some(b >> 4),
                    stop_signal: b >> 1,
                })
            }
            5 => Transition::User(UserOp::Start(a)),
            6 => {
                let b = next().unwrap_or(0);
                Transition::User(UserOp::Stop(a, (b & 1 == 1).then_some(b >> 1)))
            }
            7 => Transition::User(UserOp::Kill(a, next().unwrap_or(0))),
            8 => Transition::User(UserOp::Restart(a)),
            9 => Transition::User(UserOp::Remove(a, next().unwrap_or(0) & 1 == 1)),
            10 => Transition::User(UserOp::Wait(a, next().unwrap_or(0))),
            11 => Transition::Fault(FaultKind::StreamBreak, a),
            12 => Transition::Fault(FaultKind::ContainerdCrash, a),
            13 => Transition::Fault(FaultKind::ShimDeath, a),
            14 => Transition::Fault(FaultKind::DaemonCrash, a),
            _ => {
                // Every per-call and per-event kind, armed for the next one.
                let kind = [
                    FaultKind::RpcUnavailable,
                    FaultKind::RpcDeadline,
                    FaultKind::EventDuplicate,
                    FaultKind::EventReorder,
                    FaultKind::EventStale,
                    FaultKind::RpcRefused,
                    FaultKind::EventLost,
                    FaultKind::ExitReportedAgain,
                    FaultKind::OomLate,
                    FaultKind::PidReuse,
                ][usize::from(a) % 10];
                Transition::Fault(kind, a)
            }
        };
        out.push(t);
    }
    (u64::from_le_bytes(seed), out)
}

/// Runs one fuzz input; `Err` is a broken invariant (the fuzzer's crash).
pub fn fuzz_one(bytes: &[u8]) -> Result<RunStats, SimFailure> {
    let (seed, transitions) = decode(bytes);
    run_script(
        seed,
        &transitions,
        &SimOptions {
            trace_len: 80,
            ..SimOptions::default()
        },
    )
}
