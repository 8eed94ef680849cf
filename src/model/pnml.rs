//! PNML reader for Place/Transition nets (ISO/IEC 15909-2, as used by the Model Checking
//! Contest).
//!
//! Accepted: any number of (nested) pages, reference places/transitions, names or ids, arc
//! inscriptions, files with or without an XML declaration, attributes written `type ="…"`.
//! Refused with the construct and its position: coloured / high-level nets (symmetric nets,
//! `hlinitialMarking`, `hlinscription`, sorts, declarations), and inhibitor, reset, read or test
//! arcs (PNML `<type value="…"/>` on an arc). Malformed XML is reported with line and column.

use crate::error::{line_col, ModelError};
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

    fn syntax(&self, offset: usize, message: impl Into<String>) -> ModelError {
        let (line, column) = self.pos(offset);
        ModelError::Syntax {
            path: self.path.clone(),
            line,
            column,
            message: message.into(),
        }
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
                return Ok(Some(v.into_owned()));
            }
        }
        Ok(None)
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

/// Parses PNML text; `path` is used in error messages only.
pub fn parse(text: &[u8], path: &Path) -> Result<PetriNet, ModelError> {
    let p = Parser {
        path: path.to_path_buf(),
        text,
    };
    let mut reader = Reader::from_reader(text);
    reader.config_mut().trim_text(true);
    reader.config_mut().check_end_names = true;

    let mut net = PetriNet::default();
    let mut arcs: Vec<RawArc> = Vec::new();
    let mut place_index: HashMap<String, usize> = HashMap::new();
    let mut trans_index: HashMap<String, usize> = HashMap::new();
    // Reference nodes (referencePlace / referenceTransition) map an id to another node's id.
    let mut references: HashMap<String, (String, usize)> = HashMap::new();

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
                            Node::Other
                        }
                        b"place" => {
                            let id = p.required_attr(e, b"id", offset)?;
                            if place_index.contains_key(&id) || trans_index.contains_key(&id) {
                                return Err(p.syntax(offset, format!("duplicate node id '{id}'")));
                            }
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
                            if place_index.contains_key(&id) || trans_index.contains_key(&id) {
                                return Err(p.syntax(offset, format!("duplicate node id '{id}'")));
                            }
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
                            references.insert(id, (target, offset));
                            Node::Other
                        }
                        b"arc" => {
                            let id = p.required_attr(e, b"id", offset)?;
                            let source = p.required_attr(e, b"source", offset)?;
                            let target = p.required_attr(e, b"target", offset)?;
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
                        b"page" | b"name" | b"text" | b"graphics" | b"initialMarking"
                        | b"inscription" | b"position" | b"offset" | b"dimension" | b"fill"
                        | b"line" | b"font" => Node::Other,
                        other => {
                            // Unknown elements inside a node may change its meaning: refuse.
                            if matches!(
                                parent,
                                Some(Node::Arc(_) | Node::Place(_) | Node::Transition(_))
                            ) && stack.last().map(|s| s.as_slice()) != Some(b"graphics")
                            {
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
                }
            }
            Event::End(_) => {
                stack.pop();
                node_stack.pop();
                if toolspecific_depth == Some(stack.len()) {
                    toolspecific_depth = None;
                }
            }
            Event::Text(t) => {
                if toolspecific_depth.is_some()
                    || stack.last().map(|s| s.as_slice()) != Some(b"text")
                {
                    continue;
                }
                let n = stack.len();
                let owner = stack.get(n.wrapping_sub(2)).map(|s| s.as_slice());
                let value = t
                    .unescape()
                    .map_err(|err| p.syntax(offset, format!("bad text: {err}")))?;
                let value = value.trim();
                match (node_stack.last(), owner) {
                    (Some(Node::Place(i)), Some(b"name")) if n >= 2 => {
                        net.places[*i].name = Some(value.to_string());
                    }
                    (Some(Node::Transition(i)), Some(b"name")) => {
                        net.transitions[*i].name = Some(value.to_string());
                    }
                    (Some(Node::Place(i)), Some(b"initialMarking")) => {
                        net.places[*i].initial = value.parse().map_err(|_| {
                            p.syntax(
                                offset,
                                format!("initial marking '{value}' is not a non-negative integer"),
                            )
                        })?;
                    }
                    (Some(Node::Arc(i)), Some(b"inscription")) => {
                        let w: u64 = value.parse().map_err(|_| {
                            p.syntax(
                                offset,
                                format!("arc inscription '{value}' is not a positive integer"),
                            )
                        })?;
                        if w == 0 {
                            return Err(
                                p.syntax(offset, "arc inscription 0 (weights must be positive)")
                            );
                        }
                        arcs[*i].weight = w;
                    }
                    _ => {}
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
            (Some(&pl), _, _, Some(&tr)) => net.transitions[tr].pre.push((pl as u32, arc.weight)),
            (_, Some(&tr), Some(&pl), _) => net.transitions[tr].post.push((pl as u32, arc.weight)),
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
}
