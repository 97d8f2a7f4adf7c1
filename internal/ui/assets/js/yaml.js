// yaml.js: a small YAML reader, enough for pipeline documents: block mappings and sequences,
// flow collections ([a, b], {k: v}), plain and quoted scalars, block scalars (| and >) and
// comments. Anchors, aliases, tags and multi-document streams are not supported; the dashboard
// only needs each step's id, uses and needs, and falls back to a graph without edges when a
// document does not parse.

// parsePipeline returns {key, steps: [{id, uses, needs: []}]} from a pipeline's source (YAML
// or JSON). It throws an Error when the source cannot be read.
export function parsePipeline(src) {
  let doc;
  try {
    doc = JSON.parse(src);
  } catch {
    doc = parseYAML(src);
  }
  if (!doc || typeof doc !== 'object' || !Array.isArray(doc.steps)) {
    throw new Error('pipeline document has no steps list');
  }
  const steps = doc.steps.filter((st) => st && typeof st === 'object' && st.id !== undefined).map((st) => ({
    id: String(st.id),
    uses: st.uses === undefined ? '' : String(st.uses),
    needs: Array.isArray(st.needs) ? st.needs.map(String) : (st.needs ? [String(st.needs)] : []),
  }));
  return {key: doc.key, steps};
}

// parseYAML parses one YAML document of the subset above.
export function parseYAML(src) {
  const lines = [];
  src.replace(/\r\n?/g, '\n').split('\n').forEach((raw, i) => {
    const text = stripComment(raw);
    if (text.trim() === '' || text.trim() === '---') {
      lines.push({indent: -1, text: '', raw, no: i + 1});
      return;
    }
    const indent = text.length - text.trimStart().length;
    lines.push({indent, text: text.trim(), raw, no: i + 1});
  });
  const p = {lines, i: 0};
  skipBlank(p);
  if (p.i >= lines.length) return null;
  return parseBlock(p, lines[p.i].indent);
}

function stripComment(line) {
  let q = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (q) {
      if (c === q && !(q === '"' && line[i - 1] === '\\')) q = null;
    } else if (c === '"' || c === "'") {
      if (i === 0 || /[\s\[\]{},:]/.test(line[i - 1])) q = c;
    } else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) {
      return line.slice(0, i).trimEnd();
    }
  }
  return line.trimEnd();
}

function skipBlank(p) {
  while (p.i < p.lines.length && p.lines[p.i].indent < 0) p.i++;
}

function fail(line, msg) {
  throw new Error(`yaml line ${line ? line.no : '?'}: ${msg}`);
}

function parseBlock(p, indent) {
  skipBlank(p);
  const line = p.lines[p.i];
  if (!line || line.indent < indent) return null;
  if (line.text === '-' || line.text.startsWith('- ')) return parseSeq(p, line.indent);
  if (findColon(line.text) >= 0) return parseMap(p, line.indent);
  // A plain scalar over one or more lines.
  const parts = [];
  while (p.i < p.lines.length && p.lines[p.i].indent >= indent) {
    parts.push(p.lines[p.i].text);
    p.i++;
    skipBlank(p);
  }
  return scalar(parts.join(' '));
}

function parseSeq(p, indent) {
  const out = [];
  for (;;) {
    skipBlank(p);
    const line = p.lines[p.i];
    if (!line || line.indent !== indent || !(line.text === '-' || line.text.startsWith('- '))) break;
    const rest = line.text.slice(1).trimStart();
    if (rest === '') {
      p.i++;
      out.push(parseBlock(p, indent + 1));
      continue;
    }
    // "- key: value" starts a mapping whose other keys sit at the column of "key".
    const col = indent + (line.text.length - rest.length);
    p.lines[p.i] = {...line, indent: col, text: rest};
    out.push(parseValueLine(p, col));
  }
  return out;
}

// parseValueLine parses the item whose first line is p.lines[p.i] at column col.
function parseValueLine(p, col) {
  const line = p.lines[p.i];
  if (line.text === '-' || line.text.startsWith('- ')) return parseSeq(p, col);
  if (line.text[0] !== '[' && line.text[0] !== '{' && findColon(line.text) >= 0) return parseMap(p, col);
  return inlineValue(p, line.text, col - 1);
}

function parseMap(p, indent) {
  const out = {};
  for (;;) {
    skipBlank(p);
    const line = p.lines[p.i];
    if (!line || line.indent !== indent) break;
    if (line.text.startsWith('- ')) break;
    const c = findColon(line.text);
    if (c < 0) fail(line, 'expected "key: value"');
    const key = String(scalar(line.text.slice(0, c).trim()));
    const rest = line.text.slice(c + 1).trim();
    if (rest === '') {
      p.i++;
      skipBlank(p);
      const next = p.lines[p.i];
      if (next && (next.indent > indent || (next.indent === indent && (next.text === '-' || next.text.startsWith('- '))))) {
        out[key] = parseBlock(p, next.indent);
      } else {
        out[key] = null;
      }
      continue;
    }
    out[key] = inlineValue(p, rest, indent);
  }
  return out;
}

// inlineValue parses the value that starts on the current line after "key:" (or "- "), and
// consumes that line and any continuation lines.
function inlineValue(p, rest, indent) {
  const line = p.lines[p.i];
  if (rest[0] === '|' || rest[0] === '>') {
    p.i++;
    const body = [];
    let bodyIndent = -1;
    while (p.i < p.lines.length) {
      const l = p.lines[p.i];
      const raw = l.raw;
      const ind = raw.length - raw.trimStart().length;
      if (raw.trim() !== '' && ind <= indent) break;
      if (raw.trim() !== '' && bodyIndent < 0) bodyIndent = ind;
      body.push(raw.trim() === '' ? '' : raw.slice(Math.max(bodyIndent, 0)));
      p.i++;
    }
    while (body.length && body[body.length - 1] === '') body.pop();
    return rest[0] === '|' ? body.join('\n') + '\n' : body.join(' ') + '\n';
  }
  if (rest[0] === '[' || rest[0] === '{') {
    let text = rest;
    p.i++;
    for (;;) {
      const f = {s: text, i: 0};
      try {
        const v = flowValue(f);
        skipSpace(f);
        if (f.i < f.s.length) fail(line, 'unexpected text after a flow collection');
        return v;
      } catch (e) {
        if (!(e instanceof Incomplete) || p.i >= p.lines.length) {
          if (e instanceof Incomplete) fail(line, 'unterminated flow collection');
          throw e;
        }
        text += ' ' + p.lines[p.i].text;
        p.i++;
      }
    }
  }
  p.i++;
  // A plain scalar may continue on more-indented lines.
  const parts = [rest];
  while (p.i < p.lines.length && p.lines[p.i].indent > indent && rest[0] !== '"' && rest[0] !== "'") {
    parts.push(p.lines[p.i].text);
    p.i++;
  }
  return scalar(parts.join(' '));
}

// findColon returns the index of the mapping colon ("key: v" or "key:") outside quotes and
// brackets, or -1.
function findColon(text) {
  let q = null;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (q) {
      if (c === q) q = null;
      continue;
    }
    if ((c === '"' || c === "'") && i === 0) q = c;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    else if (c === ':' && depth === 0 && (i + 1 === text.length || text[i + 1] === ' ' || text[i + 1] === '\t')) return i;
  }
  return -1;
}

class Incomplete extends Error {}

function skipSpace(f) {
  while (f.i < f.s.length && /\s/.test(f.s[f.i])) f.i++;
}

function flowValue(f) {
  skipSpace(f);
  if (f.i >= f.s.length) throw new Incomplete('end of input');
  const c = f.s[f.i];
  if (c === '[') {
    f.i++;
    const out = [];
    for (;;) {
      skipSpace(f);
      if (f.i >= f.s.length) throw new Incomplete('end of input');
      if (f.s[f.i] === ']') {
        f.i++;
        return out;
      }
      out.push(flowValue(f));
      skipSpace(f);
      if (f.s[f.i] === ',') f.i++;
      else if (f.i >= f.s.length) throw new Incomplete('end of input');
      else if (f.s[f.i] !== ']') throw new Error('expected , or ] in a flow sequence');
    }
  }
  if (c === '{') {
    f.i++;
    const out = {};
    for (;;) {
      skipSpace(f);
      if (f.i >= f.s.length) throw new Incomplete('end of input');
      if (f.s[f.i] === '}') {
        f.i++;
        return out;
      }
      const key = flowScalar(f, true);
      skipSpace(f);
      let v = null;
      if (f.s[f.i] === ':') {
        f.i++;
        skipSpace(f);
        if (f.s[f.i] !== ',' && f.s[f.i] !== '}') v = flowValue(f);
      }
      out[String(key)] = v;
      skipSpace(f);
      if (f.s[f.i] === ',') f.i++;
      else if (f.i >= f.s.length) throw new Incomplete('end of input');
      else if (f.s[f.i] !== '}') throw new Error('expected , or } in a flow mapping');
    }
  }
  return flowScalar(f, false);
}

function flowScalar(f, isKey) {
  const c = f.s[f.i];
  if (c === '"' || c === "'") {
    const end = quotedEnd(f.s, f.i);
    if (end < 0) throw new Incomplete('unterminated string');
    const v = unquote(f.s.slice(f.i, end + 1));
    f.i = end + 1;
    return v;
  }
  const start = f.i;
  while (f.i < f.s.length) {
    const ch = f.s[f.i];
    if (ch === ',' || ch === ']' || ch === '}') break;
    if (ch === ':' && (isKey || /[\s,\]}]/.test(f.s[f.i + 1] || ' '))) break;
    f.i++;
  }
  return scalar(f.s.slice(start, f.i).trim());
}

function quotedEnd(s, i) {
  const q = s[i];
  for (let j = i + 1; j < s.length; j++) {
    if (q === '"' && s[j] === '\\') {
      j++;
      continue;
    }
    if (s[j] === q) {
      if (q === "'" && s[j + 1] === "'") {
        j++;
        continue;
      }
      return j;
    }
  }
  return -1;
}

function unquote(t) {
  if (t[0] === "'") return t.slice(1, -1).replace(/''/g, "'");
  try {
    return JSON.parse(t);
  } catch {
    return t.slice(1, -1);
  }
}

function scalar(t) {
  t = t.trim();
  if (t === '') return null;
  if ((t[0] === '"' || t[0] === "'") && quotedEnd(t, 0) === t.length - 1) return unquote(t);
  if (t === '~' || t === 'null' || t === 'Null' || t === 'NULL') return null;
  if (/^(true|True|TRUE)$/.test(t)) return true;
  if (/^(false|False|FALSE)$/.test(t)) return false;
  if (/^[-+]?\d+$/.test(t)) return Number(t);
  if (/^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$/.test(t)) return Number(t);
  return t;
}
