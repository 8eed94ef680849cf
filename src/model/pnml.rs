//! PNML reader for Place/Transition nets (ISO/IEC 15909-2, as used by the Model Checking
//! Contest).
//!
//! Accepted: any number of (nested) pages, reference places/transitions, names or ids, arc
//! inscriptions, files with or without an XML declaration, attributes written `type ="…"`.
//! Refused with the construct and its position: coloured / high-level nets (symmetric nets,
//! `hlinitialMarking`, `hlinscription`, sorts, declarations), and inhibitor, reset, read or test
//! arcs (PNML `<type value="…"/>` on an arc), and what the standard does not allow (duplicate
//! ids, repeated or empty labels, characters outside XML; see [`parse`] and docs/ARCHITECTURE.md).
//! Malformed XML is reported with line and column.

use crate::error::{line_col, ModelError, TextError};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A parsed Place/Transition net, places and transitions in file order.
#[derive(Clone, Debug, Default)]
pub struct PetriNet {
    pub name: String,
    pub places: Vec<Place>,
    pub transitions: Vec<Transition>,
}

#[derive(Clone, Debug)]
pub struct Place {
    pub id: String,
    pub name: Option<String>,
    pub initial: u64,
}

#[derive(Clone, Debug)]
pub struct Transition {
    pub id: String,
    pub name: Option<String>,
    /// Input arcs: (place index, weight), place indices ascending, weights summed.
    pub pre: Vec<(u32, u64)>,
    /// Output arcs: (place index, weight), place indices ascending, weights summed.
    pub post: Vec<(u32, u64)>,
}

impl Transition {
    /// The label: the transition's name when it has one, else its id.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// Reads and parses a PNML file.
pub fn parse_file(path: &Path) -> Result<PetriNet, ModelError> {
    let bytes = std::fs::read(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes, path)
}

/// Records `id` at `offset`, refusing a second use anywhere in the document.
fn register_id(
    p: &Parser,
    ids: &mut HashMap<String, usize>,
    id: &str,
    offset: usize,
) -> Result<(), ModelError> {
    if id.is_empty() {
        return Err(p.syntax(offset, "empty id (an id is a non-empty XML name)"));
    }
    if let Some(&first) = ids.get(id) {
        let (line, column) = p.pos(first);
        return Err(p.syntax(
            offset,
            format!("duplicate id '{id}' (first used at {line}:{column}); ids must be unique in a PNML document"),
        ));
    }
    ids.insert(id.to_string(), offset);
    Ok(())
}

/// A node, as a key of the labels met on it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum NodeKey {
    Place(usize),
    Transition(usize),
    Arc(usize),
}

/// What kind of node an element belongs to while we are inside it.
enum Node {
    Place(usize),
    Transition(usize),
    Arc(usize),
    Other,
}

struct RawArc {
    id: String,
    source: String,
    target: String,
    weight: u64,
    offset: usize,
}

struct Parser<'a> {
    path: PathBuf,
    text: &'a [u8],
}

impl Parser<'_> {
    fn pos(&self, offset: usize) -> (usize, usize) {
        line_col(self.text, offset)
    }

    /// `message` at `offset` of the file.
    fn at(&self, offset: usize, message: impl Into<String>) -> TextError {
        let (line, column) = self.pos(offset);
        TextError {
            path: self.path.clone(),
            line,
            column,
            message: message.into(),
        }
    }

    fn syntax(&self, offset: usize, message: impl Into<String>) -> ModelError {
        ModelError::Syntax(self.at(offset, message))
    }

    fn limit(&self, offset: usize, message: impl Into<String>) -> ModelError {
        ModelError::Limit(self.at(offset, message))
    }

    fn unsupported(&self, offset: usize, construct: impl Into<String>) -> ModelError {
        let (line, column) = self.pos(offset);
        ModelError::Unsupported {
            path: self.path.clone(),
            line,
            column,
            construct: construct.into(),
        }
    }

    fn attr(
        &self,
        e: &BytesStart,
        key: &[u8],
        offset: usize,
    ) -> Result<Option<String>, ModelError> {
        for a in e.attributes() {
            let a = a.map_err(|err| self.syntax(offset, format!("bad attribute: {err}")))?;
            if a.key.as_ref() == key {
                let v = a
                    .unescape_value()
                    .map_err(|err| self.syntax(offset, format!("bad attribute value: {err}")))?;
                self.check_chars(&v, offset)?;
                return Ok(Some(v.into_owned()));
            }
        }
        Ok(None)
    }

    /// Refuses characters XML 1.0 does not allow in a document (NUL and the other C0
    /// controls but tab, line feed and carriage return), which a character reference such as
    /// `&#0;` could still produce after the raw text passed [`check_document`].
    fn check_chars(&self, value: &str, offset: usize) -> Result<(), ModelError> {
        // Nearly every value is printable ASCII: a byte test the compiler vectorises, before
        // decoding characters (large nets spend most of their parse time here otherwise).
        if value
            .bytes()
            .all(|b| (0x20..0x80).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r'))
        {
            return Ok(());
        }
        match value.chars().find(|&c| forbidden(c)) {
            Some(c) => Err(self.syntax(
                offset,
                format!(
                    "character U+{:04X} is not allowed in an XML document",
                    c as u32
                ),
            )),
            None => Ok(()),
        }
    }

    fn required_attr(
        &self,
        e: &BytesStart,
        key: &[u8],
        offset: usize,
    ) -> Result<String, ModelError> {
        self.attr(e, key, offset)?.ok_or_else(|| {
            self.syntax(
                offset,
                format!(
                    "<{}> lacks the required attribute '{}'",
                    String::from_utf8_lossy(e.name().as_ref()),
                    String::from_utf8_lossy(key)
                ),
            )
        })
    }
}

/// The most tokens a place counter holds (32 bits, the widest): larger initial markings and
/// arc weights, alone or summed over parallel arcs, are refused with their position.
const MAX_TOKENS: u64 = u32::MAX as u64;

/// Whether XML 1.0 forbids `c` in a document (`Char` production: C0 controls except tab,
/// line feed and carriage return; U+FFFE and U+FFFF).
fn forbidden(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{FFFE}' || c == '\u{FFFF}'
}

/// The whole document must be UTF-8 text of XML characters: the first offending byte is
/// reported with its position (a NUL would otherwise end a name or a number silently in
/// some tools, and quick-xml passes it through).
fn check_document(p: &Parser) -> Result<(), ModelError> {
    let text = std::str::from_utf8(p.text).map_err(|e| {
        let at = e.valid_up_to();
        p.syntax(
            at,
            format!(
                "byte 0x{:02x} is not valid UTF-8 (spillway reads PNML as UTF-8)",
                p.text[at]
            ),
        )
    })?;
    if let Some((at, c)) = text.char_indices().find(|&(_, c)| forbidden(c)) {
        return Err(p.syntax(
            at,
            format!(
                "character U+{:04X} is not allowed in an XML document",
                c as u32
            ),
        ));
    }
    Ok(())
}

/// A label of a node whose content spillway reads, and whose repetition would be ambiguous.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum LabelKind {
    Name,
    InitialMarking,
    Inscription,
}

impl LabelKind {
    fn element(self) -> &'static str {
        match self {
            LabelKind::Name => "name",
            LabelKind::InitialMarking => "initialMarking",
            LabelKind::Inscription => "inscription",
        }
    }
}

/// Parses PNML text; `path` is used in error messages only.
///
/// Beyond well-formed XML, what ISO/IEC 15909-2 (the PNML core model and the P/T net type
/// definition) requires of the constructs spillway reads is checked, and refused with a
/// position: ids are unique in the document (they are `xsd:ID`s); a place has at most one
/// `<initialMarking>`, an arc at most one `<inscription>`, a node at most one `<name>`; an
/// initial marking or inscription holds exactly one `<text>` with a number (an empty one has
/// no value); NUL and other control characters are not XML characters.
pub fn parse(text: &[u8], path: &Path) -> Result<PetriNet, ModelError> {
    let p = Parser {
        path: path.to_path_buf(),
        text,
    };
    check_document(&p)?;
    let mut reader = Reader::from_reader(text);
    reader.config_mut().trim_text(true);
    reader.config_mut().check_end_names = true;

    let mut net = PetriNet::default();
    let mut arcs: Vec<RawArc> = Vec::new();
    let mut place_index: HashMap<String, usize> = HashMap::new();
    let mut trans_index: HashMap<String, usize> = HashMap::new();
    // Reference nodes (referencePlace / referenceTransition) map an id to another node's id.
    let mut references: HashMap<String, (String, usize)> = HashMap::new();
    // Every id in the document (net, pages, nodes, reference nodes, arcs) → where it is.
    let mut ids: HashMap<String, usize> = HashMap::new();
    // Labels already met on a node: (kind, node) → offset.
    let mut labels_seen: HashMap<(LabelKind, NodeKey), usize> = HashMap::new();
    // For each open element, how many <text> children it has had so far.
    let mut texts: Vec<u32> = Vec::new();
    // The content of the open <text> element of a node label (text and CDATA pieces).
    let mut text_value: Option<(String, usize)> = None;

    // The element path from the root, and for each open element the node it belongs to.
    let mut stack: Vec<Vec<u8>> = Vec::new();
    let mut node_stack: Vec<Node> = Vec::new();
    let mut seen_net = false;
    let mut seen_root = false;
    let mut toolspecific_depth: Option<usize> = None;
    let mut buf = Vec::new();

    loop {
        // The event starts after any whitespace the reader skips (trim_text).
        let mut offset = reader.buffer_position() as usize;
        while offset < text.len() && text[offset].is_ascii_whitespace() {
            offset += 1;
        }
        let event = reader.read_event_into(&mut buf).map_err(|err| {
            let at = reader.error_position() as usize;
            p.syntax(at, format!("malformed XML: {err}"))
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let is_empty = matches!(event, Event::Empty(_));
                let name = e.local_name().as_ref().to_vec();
                if toolspecific_depth.is_none() {
                    let parent = node_stack.last();
                    // The node this element is a direct child of, if any (labels of a node
                    // are its direct children).
                    let direct = match (parent, stack.last().map(|s| s.as_slice())) {
                        (Some(Node::Place(i)), Some(b"place")) => Some(NodeKey::Place(*i)),
                        (Some(Node::Transition(i)), Some(b"transition")) => {
                            Some(NodeKey::Transition(*i))
                        }
                        (Some(Node::Arc(i)), Some(b"arc")) => Some(NodeKey::Arc(*i)),
                        _ => None,
                    };
                    let in_node = matches!(
                        parent,
                        Some(Node::Arc(_) | Node::Place(_) | Node::Transition(_))
                    );
                    let node = match name.as_slice() {
                        b"pnml" => {
                            seen_root = true;
                            Node::Other
                        }
                        b"net" => {
                            if seen_net {
                                return Err(p.unsupported(offset, "a second <net> in one file"));
                            }
                            seen_net = true;
                            let ty = p.attr(e, b"type", offset)?.unwrap_or_default();
                            if !ty.to_ascii_lowercase().contains("ptnet") {
                                return Err(p.unsupported(
                                    offset,
                                    format!(
                                        "net type '{ty}': only Place/Transition nets (ptnet) are supported, not coloured or high-level nets"
                                    ),
                                ));
                            }
                            net.name = p.attr(e, b"id", offset)?.unwrap_or_default();
                            // spillway does not need the net's and pages' ids: one that is
                            // missing is tolerated, one that is used twice is not.
                            if !net.name.is_empty() {
                                register_id(&p, &mut ids, &net.name, offset)?;
                            }
                            Node::Other
                        }
                        b"page" if !in_node => {
                            if let Some(id) = p.attr(e, b"id", offset)? {
                                register_id(&p, &mut ids, &id, offset)?;
                            }
                            Node::Other
                        }
                        b"place" => {
                            let id = p.required_attr(e, b"id", offset)?;
                            register_id(&p, &mut ids, &id, offset)?;
                            place_index.insert(id.clone(), net.places.len());
                            net.places.push(Place {
                                id,
                                name: None,
                                initial: 0,
                            });
                            Node::Place(net.places.len() - 1)
                        }
                        b"transition" => {
                            let id = p.required_attr(e, b"id", offset)?;
                            register_id(&p, &mut ids, &id, offset)?;
                            trans_index.insert(id.clone(), net.transitions.len());
                            net.transitions.push(Transition {
                                id,
                                name: None,
                                pre: Vec::new(),
                                post: Vec::new(),
                            });
                            Node::Transition(net.transitions.len() - 1)
                        }
                        b"referencePlace" | b"referenceTransition" => {
                            let id = p.required_attr(e, b"id", offset)?;
                            let target = p.required_attr(e, b"ref", offset)?;
                            register_id(&p, &mut ids, &id, offset)?;
                            references.insert(id, (target, offset));
                            Node::Other
                        }
                        b"arc" => {
                            let id = p.required_attr(e, b"id", offset)?;
                            let source = p.required_attr(e, b"source", offset)?;
                            let target = p.required_attr(e, b"target", offset)?;
                            register_id(&p, &mut ids, &id, offset)?;
                            arcs.push(RawArc {
                                id,
                                source,
                                target,
                                weight: 1,
                                offset,
                            });
                            Node::Arc(arcs.len() - 1)
                        }
                        b"toolspecific" => {
                            // Tool-specific data is opaque by the standard: skip it whole.
                            if !is_empty {
                                toolspecific_depth = Some(stack.len());
                            }
                            Node::Other
                        }
                        b"hlinitialMarking" | b"hlinscription" | b"declaration"
                        | b"declarations" | b"structure" => {
                            return Err(p.unsupported(
                                offset,
                                format!(
                                    "<{}> (coloured / high-level net annotation)",
                                    String::from_utf8_lossy(&name)
                                ),
                            ));
                        }
                        b"type" => match parent {
                            Some(Node::Arc(i)) => {
                                let v = p.attr(e, b"value", offset)?.unwrap_or_default();
                                if v != "normal" {
                                    return Err(p.unsupported(
                                        offset,
                                        format!("{v} arc '{}'", arcs[*i].id),
                                    ));
                                }
                                Node::Other
                            }
                            Some(Node::Place(i)) => {
                                return Err(p.unsupported(
                                    offset,
                                    format!(
                                        "typed place '{}' (coloured net sort)",
                                        net.places[*i].id
                                    ),
                                ));
                            }
                            _ => Node::Other,
                        },
                        label @ (b"name" | b"initialMarking" | b"inscription") => {
                            let kind = match label {
                                b"name" => LabelKind::Name,
                                b"initialMarking" => LabelKind::InitialMarking,
                                _ => LabelKind::Inscription,
                            };
                            let allowed = matches!(
                                (kind, direct),
                                (LabelKind::Name, Some(_))
                                    | (LabelKind::InitialMarking, Some(NodeKey::Place(_)))
                                    | (LabelKind::Inscription, Some(NodeKey::Arc(_)))
                            );
                            match direct {
                                Some(key) if allowed => {
                                    // The P/T net grammar makes each of these optional: at
                                    // most one per node, or which one counts is a guess.
                                    if let Some(&first) = labels_seen.get(&(kind, key)) {
                                        let (line, column) = p.pos(first);
                                        return Err(p.syntax(
                                            offset,
                                            format!(
                                                "a second <{}> in {} (the first is at {line}:{column})",
                                                kind.element(),
                                                describe_node(&net, &arcs, key)
                                            ),
                                        ));
                                    }
                                    labels_seen.insert((kind, key), offset);
                                    if is_empty && kind != LabelKind::Name {
                                        return Err(p.syntax(
                                            offset,
                                            format!(
                                                "<{}/> in {} has no <text> value",
                                                kind.element(),
                                                describe_node(&net, &arcs, key)
                                            ),
                                        ));
                                    }
                                }
                                // The label of another kind of node changes nothing spillway
                                // reads, but is not P/T net PNML either: refuse it.
                                _ if in_node && kind != LabelKind::Name => {
                                    return Err(p.unsupported(
                                        offset,
                                        format!(
                                            "<{}> outside {} ",
                                            kind.element(),
                                            if kind == LabelKind::InitialMarking {
                                                "a place (only places have an initial marking)"
                                            } else {
                                                "an arc (only arcs have an inscription)"
                                            }
                                        )
                                        .trim_end()
                                        .to_string(),
                                    ));
                                }
                                _ => {}
                            }
                            Node::Other
                        }
                        b"text" => {
                            if let Some(count) = texts.last_mut() {
                                *count += 1;
                                let owner = stack.last().map(|s| s.as_slice());
                                if *count > 1
                                    && in_node
                                    && matches!(
                                        owner,
                                        Some(b"name" | b"initialMarking" | b"inscription")
                                    )
                                {
                                    return Err(p.syntax(
                                        offset,
                                        format!(
                                            "a second <text> in <{}>: a label has one value",
                                            String::from_utf8_lossy(owner.unwrap_or_default())
                                        ),
                                    ));
                                }
                            }
                            if in_node {
                                if is_empty {
                                    // `<text/>`: an empty value, handled as `<text></text>`.
                                    let n = stack.len();
                                    let owner = stack.get(n.wrapping_sub(1)).map(|s| s.as_slice());
                                    label_text(&p, &mut net, &mut arcs, parent, owner, "", offset)?;
                                } else {
                                    text_value = Some((String::new(), offset));
                                }
                            }
                            Node::Other
                        }
                        b"page" | b"graphics" | b"position" | b"offset" | b"dimension"
                        | b"fill" | b"line" | b"font" => Node::Other,
                        other => {
                            // Unknown elements inside a node may change its meaning: refuse.
                            if in_node && stack.last().map(|s| s.as_slice()) != Some(b"graphics") {
                                return Err(p.unsupported(
                                    offset,
                                    format!("element <{}>", String::from_utf8_lossy(other)),
                                ));
                            }
                            Node::Other
                        }
                    };
                    // Elements below a node belong to that node.
                    let node = match node {
                        Node::Other => match parent {
                            Some(Node::Place(i)) => Node::Place(*i),
                            Some(Node::Transition(i)) => Node::Transition(*i),
                            Some(Node::Arc(i)) => Node::Arc(*i),
                            _ => Node::Other,
                        },
                        n => n,
                    };
                    if !is_empty {
                        node_stack.push(node);
                    }
                } else if !is_empty {
                    node_stack.push(Node::Other);
                }
                if !is_empty {
                    stack.push(name);
                    texts.push(0);
                }
            }
            Event::End(_) => {
                if toolspecific_depth.is_none() {
                    let n = stack.len();
                    let closing = stack.last().map(|s| s.as_slice());
                    if closing == Some(b"text") {
                        if let Some((value, at)) = text_value.take() {
                            let owner = stack.get(n.wrapping_sub(2)).map(|s| s.as_slice());
                            label_text(
                                &p,
                                &mut net,
                                &mut arcs,
                                node_stack.last(),
                                owner,
                                &value,
                                at,
                            )?;
                        }
                    } else if let (Some(b"initialMarking" | b"inscription"), Some(0)) =
                        (closing, texts.last())
                    {
                        // A direct label of its node (checked at its start) without a value.
                        let key = match node_stack.last() {
                            Some(Node::Place(i)) => Some(NodeKey::Place(*i)),
                            Some(Node::Arc(i)) => Some(NodeKey::Arc(*i)),
                            _ => None,
                        };
                        if let Some(key) = key {
                            let kind = if closing == Some(b"initialMarking") {
                                LabelKind::InitialMarking
                            } else {
                                LabelKind::Inscription
                            };
                            if let Some(&at) = labels_seen.get(&(kind, key)) {
                                if stack.get(n.wrapping_sub(2)).map(|s| s.as_slice())
                                    == Some(match key {
                                        NodeKey::Arc(_) => b"arc".as_slice(),
                                        _ => b"place".as_slice(),
                                    })
                                {
                                    return Err(p.syntax(
                                        at,
                                        format!(
                                            "<{}> in {} has no <text> value",
                                            kind.element(),
                                            describe_node(&net, &arcs, key)
                                        ),
                                    ));
                                }
                            }
                        }
                    }
                }
                stack.pop();
                node_stack.pop();
                texts.pop();
                if toolspecific_depth == Some(stack.len()) {
                    toolspecific_depth = None;
                }
            }
            Event::Text(t) => {
                if let Some((value, _)) = &mut text_value {
                    if toolspecific_depth.is_none()
                        && stack.last().map(|s| s.as_slice()) == Some(b"text")
                    {
                        let piece = t
                            .unescape()
                            .map_err(|err| p.syntax(offset, format!("bad text: {err}")))?;
                        value.push_str(&piece);
                    }
                }
            }
            Event::CData(t) => {
                if let Some((value, _)) = &mut text_value {
                    if toolspecific_depth.is_none()
                        && stack.last().map(|s| s.as_slice()) == Some(b"text")
                    {
                        let piece = std::str::from_utf8(&t)
                            .map_err(|err| p.syntax(offset, format!("bad CDATA text: {err}")))?;
                        value.push_str(piece);
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !stack.is_empty() {
        return Err(p.syntax(
            text.len(),
            format!(
                "unexpected end of file inside <{}>",
                String::from_utf8_lossy(stack.last().unwrap())
            ),
        ));
    }
    if !seen_root {
        return Err(p.syntax(0, "not a PNML document: no <pnml> root element"));
    }
    if !seen_net {
        return Err(p.syntax(0, "no <net> element"));
    }

    // Resolve reference nodes (possibly chained) to real node ids.
    let resolve = |id: &str, arc_offset: usize| -> Result<String, ModelError> {
        let mut cur = id.to_string();
        for _ in 0..=references.len() {
            match references.get(&cur) {
                Some((target, _)) => cur = target.clone(),
                None => return Ok(cur),
            }
        }
        Err(p.syntax(arc_offset, format!("reference cycle through '{id}'")))
    };

    // Parallel arcs are merged by summing their weights: the sum must fit a counter too.
    let mut sums: HashMap<(bool, usize, usize), u64> = HashMap::new();
    let mut add = |output: bool, tr: usize, pl: usize, arc: &RawArc| -> Result<(), ModelError> {
        let sum = sums.entry((output, tr, pl)).or_default();
        *sum = sum.saturating_add(arc.weight);
        if *sum > MAX_TOKENS {
            return Err(p.limit(
                arc.offset,
                format!(
                    "arc '{}' brings the weight between '{}' and '{}' to {}, above {MAX_TOKENS}, the widest place counter (32 bits)",
                    arc.id, arc.source, arc.target, *sum
                ),
            ));
        }
        Ok(())
    };
    for arc in &arcs {
        let src = resolve(&arc.source, arc.offset)?;
        let dst = resolve(&arc.target, arc.offset)?;
        let describe = |end: &str, id: &str| {
            p.syntax(
                arc.offset,
                format!(
                    "arc '{}' {end} '{id}', which is not a place or transition of the net",
                    arc.id
                ),
            )
        };
        match (
            place_index.get(&src),
            trans_index.get(&src),
            place_index.get(&dst),
            trans_index.get(&dst),
        ) {
            (Some(&pl), _, _, Some(&tr)) => {
                add(false, tr, pl, arc)?;
                net.transitions[tr].pre.push((pl as u32, arc.weight))
            }
            (_, Some(&tr), Some(&pl), _) => {
                add(true, tr, pl, arc)?;
                net.transitions[tr].post.push((pl as u32, arc.weight))
            }
            (None, None, _, _) => return Err(describe("has source", &arc.source)),
            (_, _, None, None) => return Err(describe("has target", &arc.target)),
            _ => {
                return Err(p.syntax(
                    arc.offset,
                    format!(
                        "arc '{}' connects '{}' to '{}': an arc must join a place and a transition",
                        arc.id, arc.source, arc.target
                    ),
                ))
            }
        }
    }
    for t in &mut net.transitions {
        t.pre = merge_arcs(std::mem::take(&mut t.pre));
        t.post = merge_arcs(std::mem::take(&mut t.post));
    }
    Ok(net)
}

/// "place 'p1'", "transition 't'", "arc 'a'": a node for error messages.
fn describe_node(net: &PetriNet, arcs: &[RawArc], key: NodeKey) -> String {
    match key {
        NodeKey::Place(i) => format!("place '{}'", net.places[i].id),
        NodeKey::Transition(i) => format!("transition '{}'", net.transitions[i].id),
        NodeKey::Arc(i) => format!("arc '{}'", arcs[i].id),
    }
}

/// Applies the value of a `<text>` element of a node's label: `owner` is the element holding
/// the `<text>` (`name`, `initialMarking`, `inscription`, or something ignored).
fn label_text(
    p: &Parser,
    net: &mut PetriNet,
    arcs: &mut [RawArc],
    node: Option<&Node>,
    owner: Option<&[u8]>,
    value: &str,
    offset: usize,
) -> Result<(), ModelError> {
    p.check_chars(value, offset)?;
    let value = value.trim();
    match (node, owner) {
        (Some(Node::Place(i)), Some(b"name")) => {
            net.places[*i].name = Some(value.to_string());
        }
        (Some(Node::Transition(i)), Some(b"name")) => {
            net.transitions[*i].name = Some(value.to_string());
        }
        (Some(Node::Place(i)), Some(b"initialMarking")) => {
            if value.is_empty() {
                return Err(p.syntax(
                    offset,
                    format!(
                        "the initial marking of place '{}' is empty: expected a non-negative integer",
                        net.places[*i].id
                    ),
                ));
            }
            let Some(m) = count(value) else {
                return Err(p.syntax(
                    offset,
                    format!("initial marking '{value}' is not a non-negative integer"),
                ));
            };
            if m > MAX_TOKENS {
                return Err(p.limit(
                    offset,
                    format!(
                        "the initial marking {value} of place '{}' exceeds {MAX_TOKENS}, the widest place counter (32 bits)",
                        net.places[*i].id
                    ),
                ));
            }
            net.places[*i].initial = m;
        }
        (Some(Node::Arc(i)), Some(b"inscription")) => {
            if value.is_empty() {
                return Err(p.syntax(
                    offset,
                    format!(
                        "the inscription of arc '{}' is empty: expected a positive integer",
                        arcs[*i].id
                    ),
                ));
            }
            let Some(w) = count(value) else {
                return Err(p.syntax(
                    offset,
                    format!("arc inscription '{value}' is not a positive integer"),
                ));
            };
            if w == 0 {
                return Err(p.syntax(offset, "arc inscription 0 (weights must be positive)"));
            }
            if w > MAX_TOKENS {
                return Err(p.limit(
                    offset,
                    format!(
                        "the weight {value} of arc '{}' exceeds {MAX_TOKENS}, the widest place counter (32 bits)",
                        arcs[*i].id
                    ),
                ));
            }
            arcs[*i].weight = w;
        }
        _ => {}
    }
    Ok(())
}

/// The number in an initial marking or an arc inscription, `None` if it is not one. A number
/// just too large for `u64` reads as `u64::MAX`, so that it is refused as a limit (above
/// [`MAX_TOKENS`]), not as a syntax error.
fn count(value: &str) -> Option<u64> {
    match value.parse() {
        Ok(v) => Some(v),
        Err(_) if value.bytes().all(|b| b.is_ascii_digit()) => Some(u64::MAX),
        Err(_) => None,
    }
}

/// Sorts arcs by place and sums the weights of parallel arcs.
fn merge_arcs(mut arcs: Vec<(u32, u64)>) -> Vec<(u32, u64)> {
    arcs.sort_unstable();
    let mut out: Vec<(u32, u64)> = Vec::with_capacity(arcs.len());
    for (pl, w) in arcs {
        match out.last_mut() {
            Some(last) if last.0 == pl => last.1 = last.1.saturating_add(w),
            _ => out.push((pl, w)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<PetriNet, ModelError> {
        parse(s.as_bytes(), Path::new("test.pnml"))
    }

    const SMALL: &str = r#"<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">
  <net id="n" type ="http://www.pnml.org/version-2009/grammar/ptnet">
    <page id="pg"><place id="p1"><name><text>P one</text></name><initialMarking><text>2</text></initialMarking></place>
    <page id="inner"><place id="p2"/>
    <transition id="t1"/>
    <arc id="a1" source="p1" target="t1"><inscription><text>2</text></inscription></arc>
    <arc id="a2" source="t1" target="p2"/></page></page>
  </net></pnml>"#;

    #[test]
    fn parses_nested_pages_spaces_and_inscriptions() {
        let net = parse_str(SMALL).unwrap();
        assert_eq!(net.places.len(), 2);
        assert_eq!(net.places[0].name.as_deref(), Some("P one"));
        assert_eq!(net.places[0].initial, 2);
        assert_eq!(net.transitions[0].pre, vec![(0, 2)]);
        assert_eq!(net.transitions[0].post, vec![(1, 1)]);
        assert_eq!(net.transitions[0].label(), "t1");
    }

    #[test]
    fn missing_place_is_an_error_with_position() {
        let bad = SMALL.replace(r#"target="p2""#, r#"target="p9""#);
        let err = parse_str(&bad).unwrap_err().to_string();
        assert!(
            err.contains("test.pnml:7:") && err.contains("'p9'"),
            "{err}"
        );
    }

    #[test]
    fn broken_xml_reports_line_and_column() {
        let bad = SMALL.replace("</page></page>", "</page></pag>");
        let err = parse_str(&bad).unwrap_err().to_string();
        assert!(err.starts_with("test.pnml:7:"), "{err}");
        assert!(err.contains("malformed XML"), "{err}");
    }

    #[test]
    fn coloured_and_inhibitor_are_refused() {
        let col = SMALL.replace("grammar/ptnet", "grammar/symmetricnet");
        let err = parse_str(&col).unwrap_err().to_string();
        assert!(
            err.contains("unsupported") && err.contains("symmetricnet"),
            "{err}"
        );
        let inh = SMALL.replace(
            r#"<arc id="a2" source="t1" target="p2"/>"#,
            r#"<arc id="a2" source="p2" target="t1"><type value="inhibitor"/></arc>"#,
        );
        let err = parse_str(&inh).unwrap_err().to_string();
        assert!(err.contains("inhibitor arc 'a2'"), "{err}");
    }

    /// `SMALL` with `from` replaced by `to` must be refused with `needle` at `line`.
    fn refused(from: &str, to: &str, line: usize, needle: &str) {
        assert!(SMALL.contains(from), "{from}");
        let text = SMALL.replacen(from, to, 1);
        let err = parse_str(&text).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("test.pnml:{line}:")) && msg.contains(needle),
            "{from} -> {to}: {msg}"
        );
        assert!(
            matches!(
                err,
                ModelError::Syntax { .. } | ModelError::Unsupported { .. }
            ),
            "{msg}"
        );
    }

    #[test]
    fn questionable_constructs_are_refused_with_a_position() {
        let marking = "<initialMarking><text>2</text></initialMarking>";
        // A second initial marking on one place.
        refused(
            marking,
            &format!("{marking}\n{marking}"),
            4,
            "a second <initialMarking> in place 'p1'",
        );
        // Duplicated ids: two arcs, an arc and a place, a page and a transition.
        refused(
            r#"<arc id="a2""#,
            r#"<arc id="a1""#,
            7,
            "duplicate id 'a1' (first used at 6:",
        );
        refused(r#"<arc id="a2""#, r#"<arc id="p1""#, 7, "duplicate id 'p1'");
        refused(
            r#"<page id="inner">"#,
            r#"<page id="t1">"#,
            5,
            "duplicate id 't1'",
        );
        refused(r#"<place id="p2"/>"#, r#"<place id=""/>"#, 4, "empty id");
        // Empty or missing values.
        refused(
            "<text>2</text></initialMarking>",
            "<text></text></initialMarking>",
            3,
            "initial marking of place 'p1' is empty",
        );
        refused(
            "<text>2</text></initialMarking>",
            "<text> </text></initialMarking>",
            3,
            "is empty",
        );
        refused(
            "<text>2</text></initialMarking>",
            "<text/></initialMarking>",
            3,
            "is empty",
        );
        refused(
            marking,
            "<initialMarking/>",
            3,
            "<initialMarking/> in place 'p1' has no <text>",
        );
        refused(
            marking,
            "<initialMarking><graphics/></initialMarking>",
            3,
            "<initialMarking> in place 'p1' has no <text>",
        );
        refused(
            "<text>2</text></initialMarking>",
            "<text>2</text><text>3</text></initialMarking>",
            3,
            "a second <text> in <initialMarking>",
        );
        refused(
            "<text>2</text></inscription>",
            "<text></text></inscription>",
            6,
            "inscription of arc 'a1' is empty",
        );
        refused(
            "<inscription>",
            "<inscription/><inscription>",
            6,
            "has no <text>",
        );
        refused(
            r#"<transition id="t1"/>"#,
            r#"<transition id="t1"><name><text>a</text></name><name><text>b</text></name></transition>"#,
            5,
            "a second <name> in transition 't1'",
        );
        refused(
            r#"<transition id="t1"/>"#,
            r#"<transition id="t1"><initialMarking><text>1</text></initialMarking></transition>"#,
            5,
            "only places have an initial marking",
        );
        // Characters XML does not allow, raw or as references, and bytes that are not UTF-8.
        refused("P one", "P\0one", 3, "U+0000");
        refused("P one", "P&#0;one", 3, "0x0 character is not permitted");
        refused(r#"id="p2""#, r#"id="p&#1;2""#, 4, "U+0001");
        // Numbers beyond the widest (32-bit) counter: a resource limit with a position.
        for (from, to, line) in [
            (
                "<text>2</text></initialMarking>",
                "<text>4294967296</text></initialMarking>",
                3,
            ),
            (
                "<text>2</text></initialMarking>",
                "<text>99999999999999999999999</text></initialMarking>",
                3,
            ),
            (
                "<text>2</text></inscription>",
                "<text>4294967296</text></inscription>",
                6,
            ),
        ] {
            let e = parse_str(&SMALL.replacen(from, to, 1)).unwrap_err();
            assert!(matches!(&e, ModelError::Limit(t) if t.line == line), "{e}");
            assert!(
                e.to_string().starts_with("test.pnml:") && e.to_string().contains("32 bits"),
                "{e}"
            );
        }
        let parallel = SMALL.replacen(
            r#"<arc id="a2" source="t1" target="p2"/>"#,
            r#"<arc id="a2" source="t1" target="p2"><inscription><text>4294967295</text></inscription></arc><arc id="a3" source="t1" target="p2"/>"#,
            1,
        );
        let e = parse_str(&parallel).unwrap_err();
        assert!(
            matches!(&e, ModelError::Limit(t) if t.line == 7) && e.to_string().contains("arc 'a3'"),
            "{e}"
        );
        assert!(parse_str(&SMALL.replacen(
            "<text>2</text></initialMarking>",
            "<text>4294967295</text></initialMarking>",
            1
        ))
        .is_ok());
        let mut bytes = SMALL.as_bytes().to_vec();
        let at = SMALL.find("P one").unwrap();
        bytes[at] = 0xff;
        let msg = parse(&bytes, Path::new("test.pnml"))
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("test.pnml:3:") && msg.contains("UTF-8"),
            "{msg}"
        );
    }

    #[test]
    fn what_the_standard_allows_is_still_read() {
        // CDATA, surrounding white space, a marking split by a comment, a name without text,
        // labels in any order, a page without an id.
        let text = SMALL
            .replacen(
                "<text>2</text></initialMarking>",
                "<text> <![CDATA[1]]><!-- c -->2 </text></initialMarking>",
                1,
            )
            .replacen(
                r#"<transition id="t1"/>"#,
                r#"<transition id="t1"><name/></transition>"#,
                1,
            )
            .replacen(r#"<page id="inner">"#, "<page>", 1);
        let net = parse_str(&text).unwrap();
        assert_eq!(net.places[0].initial, 12);
        assert_eq!(net.places[0].name.as_deref(), Some("P one"));
        assert_eq!(net.transitions[0].pre, vec![(0, 2)]);
    }
}
