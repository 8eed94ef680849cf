//! `spillway lts convert`: rewrite an LTS in another format, in one streaming pass.
//!
//! Labels can be changed on the way: `--hide REGEX` turns every label that the regular
//! expression matches *as a whole* into the internal action, and `--internal NAME` chooses the
//! internal action's name (mCRL2 calls it `tau`, CADP/LOTOS `i`); labels already named `tau` or
//! `i` count as internal and are renamed too when `--internal` is given. Labels that end up
//! with the same name become one label. Nothing else changes: state numbers, the initial state
//! and the transition order are kept.
//!
//! `.dot` output is refused above [`DOT_MAX_STATES`] states or [`DOT_MAX_TRANSITIONS`]
//! transitions unless forced, because layout tools cannot draw such graphs usefully: from the
//! header before anything is read, and by the `.dot` writer itself.

use crate::error::{LtsError, PostError};
use crate::lts::{LtsFormat, LtsSink, LtsSummary, SinkOptions};
use crate::model::LabelId;
use crate::post::graph::{check_output, write_file};
use crate::post::input::Input;
use crate::post::sources::SourceSet;
use regex::Regex;
use std::collections::HashMap;
use std::path::Path;

pub use crate::lts::dot::{DOT_MAX_STATES, DOT_MAX_TRANSITIONS};

/// Label names that denote the internal action on input.
pub const INTERNAL_NAMES: [&str; 2] = ["tau", "i"];

/// How labels are rewritten.
#[derive(Clone, Debug, Default)]
pub struct LabelOptions {
    /// Name to give the internal action; `None` keeps internal labels as they are and hides to
    /// the output format's convention (`i` for `.aut`, `tau` otherwise).
    pub internal: Option<String>,
    /// Regular expressions; a label matched as a whole by any becomes internal.
    pub hide: Vec<String>,
}

/// Whether an oversized `.dot` may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SizeLimit {
    #[default]
    Enforce,
    Force,
}

/// What a conversion did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertReport {
    pub summary: LtsSummary,
    pub labels: usize,
    /// Transitions whose label was turned into the internal action by `--hide`.
    pub hidden_transitions: u64,
    /// The input's footer says its states may repeat (see
    /// [`crate::lts::native::FLAG_STATES_MAY_REPEAT`]): a native output records it too; the
    /// text formats have no place for it, so the caller should tell the user.
    pub states_may_repeat: bool,
}

/// Refuses to write a large LTS as `.dot` unless forced.
pub fn check_dot_size(
    out: &Path,
    states: u64,
    transitions: u64,
    limit: SizeLimit,
) -> Result<(), PostError> {
    if LtsFormat::from_path(out)? == LtsFormat::Dot
        && limit == SizeLimit::Enforce
        && (states > DOT_MAX_STATES || transitions > DOT_MAX_TRANSITIONS)
    {
        return Err(PostError::Usage(format!(
            "{}: {states} states and {transitions} transitions are too many for a .dot drawing \
             (limit {DOT_MAX_STATES} states, {DOT_MAX_TRANSITIONS} transitions); use --force to write it anyway",
            out.display()
        )));
    }
    Ok(())
}

/// What happened to a label on the way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelFate {
    /// Written under its own name.
    Kept,
    /// An internal action (`tau` / `i`) renamed by `--internal`.
    Internal,
    /// Matched by `--hide`: written as the internal action.
    Hidden,
}

/// Maps input label ids to output label ids, defining output labels in the sink on first use.
pub struct LabelMap {
    internal: String,
    rename_internal: bool,
    hide: Option<Regex>,
    out_ids: HashMap<String, u32>,
    /// Input label id → (output id, fate); `u32::MAX` = not seen yet.
    map: Vec<(u32, LabelFate)>,
}

impl LabelMap {
    pub fn new(opts: &LabelOptions, out_format: LtsFormat) -> Result<Self, PostError> {
        let hide = if opts.hide.is_empty() {
            None
        } else {
            let pattern = opts
                .hide
                .iter()
                .map(|p| format!("(?:{p})"))
                .collect::<Vec<_>>()
                .join("|");
            Some(Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                PostError::Usage(format!("--hide: invalid regular expression: {e}"))
            })?)
        };
        let internal = match (&opts.internal, out_format) {
            (Some(name), _) => name.clone(),
            (None, LtsFormat::Aut) => "i".to_string(),
            (None, _) => "tau".to_string(),
        };
        Ok(LabelMap {
            internal,
            rename_internal: opts.internal.is_some(),
            hide,
            out_ids: HashMap::new(),
            map: Vec::new(),
        })
    }

    /// The output name of input label `name` and why.
    pub fn rename<'a>(&'a self, name: &'a str) -> (&'a str, LabelFate) {
        if self.hide.as_ref().is_some_and(|r| r.is_match(name)) {
            return (&self.internal, LabelFate::Hidden);
        }
        if self.rename_internal && INTERNAL_NAMES.contains(&name) {
            return (&self.internal, LabelFate::Internal);
        }
        (name, LabelFate::Kept)
    }

    /// Output id of input label `l`, defining it in `sink` if new.
    pub fn get(
        &mut self,
        l: u32,
        labels: &[String],
        sink: &mut dyn LtsSink,
    ) -> Result<(u32, LabelFate), LtsError> {
        let i = l as usize;
        if let Some(&(o, h)) = self.map.get(i) {
            if o != u32::MAX {
                return Ok((o, h));
            }
        }
        if self.map.len() <= i {
            self.map.resize(i + 1, (u32::MAX, LabelFate::Kept));
        }
        let (name, fate) = self.rename(&labels[i]);
        let name = name.to_string();
        let o = match self.out_ids.get(&name) {
            Some(&o) => o,
            None => {
                let o = self.out_ids.len() as u32;
                sink.define_label(LabelId(o), &name)?;
                self.out_ids.insert(name, o);
                o
            }
        };
        self.map[i] = (o, fate);
        Ok((o, fate))
    }

    /// Number of output labels defined so far.
    pub fn len(&self) -> usize {
        self.out_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out_ids.is_empty()
    }
}

/// Converts `input` to `output` (formats from the extensions), streaming.
pub fn convert(
    input: &Path,
    output: &Path,
    opts: &LabelOptions,
    limit: SizeLimit,
) -> Result<ConvertReport, PostError> {
    // The output is written while the input is streamed: the same file would be truncated.
    check_output(input, output)?;
    let mut reader = Input::open(input)?;
    let h = reader.header()?;
    let out_format = LtsFormat::from_path(output)?;
    check_dot_size(output, h.states, h.transitions, limit)?;
    let mut map = LabelMap::new(opts, out_format)?;
    let mut has_out = SourceSet::new(h.states)?;
    let mut hidden = 0u64;
    let options = SinkOptions {
        force: limit == SizeLimit::Force,
        states: crate::lts::fsm::state_lines(h.states, h.transitions),
    };
    let summary = write_file(output, &options, |sink| {
        // Labels known up front (native) are all kept, used or not, in their order.
        let known = reader.labels().to_vec();
        for l in 0..known.len() {
            map.get(l as u32, &known, sink)?;
        }
        reader.for_each_edge(|s, l, d, labels| -> Result<(), PostError> {
            let (o, fate) = map.get(l, labels, sink)?;
            if fate == LabelFate::Hidden {
                hidden += 1;
            }
            has_out.insert(s)?;
            sink.edge(s, LabelId(o), d)?;
            Ok(())
        })?;
        // The copy's counts are of visits as the input's are: it must say so too.
        if h.states_may_repeat {
            sink.states_may_repeat();
        }
        let with_out = has_out.count()?;
        Ok(LtsSummary {
            states: h.states,
            transitions: h.transitions,
            initial: h.initial,
            deadlocks: h.states - with_out,
        })
    })?;
    Ok(ConvertReport {
        summary,
        labels: map.len(),
        hidden_transitions: hidden,
        states_may_repeat: h.states_may_repeat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hide_matches_whole_labels_and_merges() {
        let opts = LabelOptions {
            internal: None,
            hide: vec!["lock.*".into(), "b".into()],
        };
        let m = LabelMap::new(&opts, LtsFormat::Aut).unwrap();
        assert_eq!(m.rename("lock(p1, f1)"), ("i", LabelFate::Hidden));
        assert_eq!(m.rename("b"), ("i", LabelFate::Hidden));
        assert_eq!(m.rename("ab"), ("ab", LabelFate::Kept));
        assert_eq!(m.rename("tau"), ("tau", LabelFate::Kept));
        let opts = LabelOptions {
            internal: Some("tau".into()),
            hide: vec![],
        };
        let m = LabelMap::new(&opts, LtsFormat::Aut).unwrap();
        assert_eq!(m.rename("i"), ("tau", LabelFate::Internal));
        assert!(LabelMap::new(
            &LabelOptions {
                internal: None,
                hide: vec!["(".into()]
            },
            LtsFormat::Aut
        )
        .is_err());
    }
}
