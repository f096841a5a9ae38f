//! The last steps of a run, kept cheaply (cloned, formatted only when a run
//! fails) so a failure reads as a story.

use holdfast_core::{Action, Input, Instant};
use std::collections::VecDeque;
use std::fmt::Write;

#[derive(Clone, Debug)]
pub enum TraceItem {
    In(Input),
    Out(Box<Action>),
    Note(String),
}

#[derive(Debug)]
pub struct Trace {
    len_max: usize,
    items: VecDeque<(Instant, TraceItem)>,
}

impl Trace {
    pub fn new(len_max: usize) -> Trace {
        Trace {
            len_max,
            items: VecDeque::with_capacity(len_max + 1),
        }
    }

    pub fn push(&mut self, at: Instant, item: TraceItem) {
        if self.len_max == 0 {
            return;
        }
        if self.items.len() == self.len_max {
            self.items.pop_front();
        }
        self.items.push_back((at, item));
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (at, item) in &self.items {
            let _ = match item {
                TraceItem::In(input) => writeln!(out, "{at:?}  in   {}", short_input(input)),
                TraceItem::Out(action) => writeln!(out, "{at:?}  out  {}", short_action(action)),
                TraceItem::Note(text) => writeln!(out, "{at:?}  ---  {text}"),
            };
        }
        out
    }
}

fn short_input(input: &Input) -> String {
    match input {
        Input::Restore(stored) => format!("Restore({} records)", stored.containers.len()),
        other => format!("{other:?}"),
    }
}

fn short_action(action: &Action) -> String {
    match action {
        Action::Persist(rec) => format!(
            "Persist({} {:?} run={} pid={:?} exit={:?} intents={:?})",
            rec.id, rec.presence, rec.run, rec.pid, rec.exit, rec.intents
        ),
        Action::Call {
            op,
            call: holdfast_core::Call::CreateContainer { id, .. },
        } => {
            format!("Call {op} CreateContainer({id})")
        }
        other => format!("{other:?}"),
    }
}
