"""The viewer's two HTML pages, self-contained (inline CSS and script, no external assets, so
they work offline); they draw themselves from the JSON API that scripts can use too."""

from __future__ import annotations

from html import escape

STYLE = """
body{font:14px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}th[data-sort]{cursor:pointer}th.asc::after{content:' \\25B2'}
th.desc::after{content:' \\25BC'}a{color:#0645ad}.muted{color:#777}.err{color:#b00}
img.thumb{width:64px;image-rendering:pixelated;border:1px solid #ccc}
img.strip{height:64px;image-rendering:pixelated;border:1px solid #ccc}
.pack{display:flex;width:640px;height:28px;border:1px solid #444;margin:2px 0}
.seq{position:relative;height:100%;box-sizing:border-box;border-right:3px solid #000}
.seq.a{background:rgb(170,200,255)}.seq.b{background:rgb(255,230,150)}
.loss{position:absolute;top:0;bottom:0;background:rgb(220,40,40)}
.doc{border-left:3px solid #888;padding-left:8px}.doc p{margin:4px 0;max-width:640px}
.hist{display:flex;align-items:flex-end;height:40px;gap:1px}.hist div{background:#4a7;width:6px}
pre{white-space:pre-wrap;max-width:640px;margin:0}
"""

SCRIPT_COMMON = """
function el(tag, attrs, ...kids){const e=document.createElement(tag);
  for(const [k,v] of Object.entries(attrs||{})){if(k==='class')e.className=v;else e.setAttribute(k,v);}
  for(const k of kids){e.append(k instanceof Node?k:document.createTextNode(String(k)));}return e;}
function size(n){const u=['B','KiB','MiB','GiB','TiB'];let i=0;while(n>=1024&&i<u.length-1){n/=1024;i++;}
  return i?n.toFixed(1)+' '+u[i]:n+' B';}
function age(s){for(const [u,n] of [['d',86400],['h',3600],['m',60]]){if(s>=n)return Math.round(s/n)+u;}
  return Math.round(s)+'s';}
async function getJSON(url){const r=await fetch(url);const body=await r.json();
  if(!r.ok)throw new Error(body.error||r.statusText);return body;}
"""

LIST_SCRIPT = """
// filter (status), search (any shown text) and sort (a column's header) live in the URL: ?q=&status=&sort=&desc=1
const COLUMNS=['name','config','split','layout','rows','bytes','status','age_seconds','inputs'];
let caches=[];
function state(){const p=new URLSearchParams(location.search);
  return {q:p.get('q')||'',status:p.get('status')||'',sort:COLUMNS.includes(p.get('sort'))?p.get('sort'):'',
    desc:p.get('desc')==='1'};}
function setState(s){const p=new URLSearchParams();if(s.q)p.set('q',s.q);if(s.status)p.set('status',s.status);
  if(s.sort)p.set('sort',s.sort);if(s.desc)p.set('desc','1');
  history.replaceState(null,'',location.pathname+(p.toString()?'?'+p:''));draw();}
function shown(c){return [c.name,c.config,c.split,c.layout,c.status,c.inputs].join(' ').toLowerCase();}
function draw(){const s=state();const t=document.getElementById('caches');
  document.getElementById('search').value=s.q;document.getElementById('status-filter').value=s.status;
  for(const th of t.querySelectorAll('th[data-sort]')){th.className=th.dataset.sort===s.sort?(s.desc?'desc':'asc'):'';}
  t.querySelectorAll('tr[data-id]').forEach(r=>r.remove());
  let rows=caches.filter(c=>(!s.status||c.status===s.status)&&(!s.q||shown(c).includes(s.q.toLowerCase())));
  if(s.sort){rows=rows.slice().sort((a,b)=>{const x=a[s.sort],y=b[s.sort];
    const o=typeof x==='number'?x-y:String(x).localeCompare(String(y));return s.desc?-o:o;});}
  for(const c of rows){
    const link=el('a',{href:'/caches/'+c.id},c.name);
    t.append(el('tr',{'data-id':c.id},el('td',{},link),el('td',{},c.config),el('td',{},c.split),
      el('td',{},c.layout),el('td',{},c.rows.toLocaleString()),el('td',{},size(c.bytes)),el('td',{},c.status),
      el('td',{},age(c.age_seconds)),el('td',{title:c.inputs},c.inputs)));}
  document.getElementById('count').textContent=rows.length+' of '+caches.length+' caches';}
document.getElementById('search').oninput=e=>setState({...state(),q:e.target.value});
document.getElementById('status-filter').onchange=e=>setState({...state(),status:e.target.value});
for(const th of document.querySelectorAll('#caches th[data-sort]')){th.onclick=()=>{const s=state();
  setState({...s,sort:th.dataset.sort,desc:s.sort===th.dataset.sort?!s.desc:false});};}
getJSON('/api/caches').then(all=>{caches=all;
  if(!caches.length){document.getElementById('empty').textContent='no caches under this root';return;}
  const f=document.getElementById('status-filter');
  for(const v of [...new Set(caches.map(c=>c.status))].sort())f.append(el('option',{value:v},v));
  draw();
}).catch(e=>{document.getElementById('empty').textContent=e.message;});
"""

CACHE_SCRIPT = """
const ID=document.body.dataset.cache;let limit=20,total=0;
// the first row shown lives in the URL (?offset=N), so a page of rows can be linked and reloaded
let offset=Math.max(0,parseInt(new URLSearchParams(location.search).get('offset')||'0',10)||0);
function keepOffset(){history.replaceState(null,'',location.pathname+(offset?'?offset='+offset:''));}
function renderCell(c){
  switch(c.kind){
    case 'null':return el('span',{class:'muted'},'null');
    case 'label':return el('span',{},c.value+(c.name!==null?' ('+c.name+')':''));
    case 'image':return el('img',{class:'thumb',src:c.url,title:c.label,alt:c.label});
    case 'video':return el('img',{class:'strip',src:c.url,title:c.label,alt:c.label});
    case 'images':{const s=el('span');for(const i of c.items){s.append(i?el('img',{class:'thumb',src:i.url,
      title:i.label}):el('span',{class:'muted'},'null '));}return s;}
    case 'text':return el('pre',{},c.text+(c.length>c.text.length?' ... ('+c.length+' chars)':''));
    case 'value':return el('span',{},String(c.value));
    case 'array':return el('span',{},'array '+c.shape.join('x')+' '+c.dtype);
    case 'list':return el('span',{},'['+c.values.join(', ')+(c.length>c.values.length?', ... ('+c.length+')':'')
      +']');
    default:return el('pre',{},c.text);}}
function renderPack(v){
  const box=el('div',{});const bar=el('div',{class:'pack'});
  v.sequences.forEach((s,i)=>{const seq=el('div',{class:'seq '+(i%2?'b':'a'),
      title:'tokens '+s.start+'-'+s.end});seq.style.width=(100*(s.end-s.start)/v.length)+'%';
    for(const [a,b] of s.loss){const l=el('div',{class:'loss'});l.style.left=(100*(a-s.start)/(s.end-s.start))+'%';
      l.style.width=(100*(b-a)/(s.end-s.start))+'%';seq.append(l);}
    bar.append(seq);});
  box.append(bar,el('div',{class:'muted'},(v.num_sequences??v.sequences.length)+' sequences'+
    (v.num_sequences>v.sequences.length?' (the first '+v.sequences.length+' shown)':'')+', '+v.length+
    ' tokens; red: loss mask'));
  for(const s of v.sequences){if(s.text!==undefined)box.append(el('pre',{},'['+s.start+'-'+s.end+'] '+s.text));}
  return box;}
function renderDoc(v){const d=el('div',{class:'doc'});
  for(const i of v.items){d.append(i.kind==='image'?el('img',{class:'thumb',src:i.url,title:i.label}):
    el('p',{},i.text));}return d;}
async function load(){
  const status=document.getElementById('status');
  try{const data=await getJSON('/api/caches/'+ID+'/rows?offset='+offset+'&limit='+limit);
    total=data.total;const t=document.getElementById('rows');t.replaceChildren();
    const head=el('tr',{},el('th',{},'#'));for(const c of data.columns)head.append(el('th',{},c));t.append(head);
    for(const r of data.rows){const tr=el('tr',{class:'row','data-index':r.index},el('th',{},r.index));
      if(r.view){const td=el('td',{colspan:data.columns.length});
        if(r.view.kind==='document'){td.append(el('div',{class:'muted'},Object.entries(r.cells)
          .filter(([k,c])=>c.kind==='text').map(([k,c])=>k+': '+c.text).join('   ')));}
        td.append(r.view.kind==='pack'?renderPack(r.view):renderDoc(r.view));tr.append(td);}
      else{for(const c of data.columns)tr.append(el('td',{},renderCell(r.cells[c])));}
      t.append(tr);}
    status.textContent='rows '+offset+'-'+(offset+data.rows.length-1)+' of '+total;status.className='';
  }catch(e){status.textContent=e.message;status.className='err';}}
function go(o){offset=Math.max(0,Math.min(o,Math.max(total-1,0)));keepOffset();load();}
document.getElementById('prev').onclick=()=>go(offset-limit);
document.getElementById('next').onclick=()=>{if(offset+limit<total)go(offset+limit);};
document.getElementById('jump').onsubmit=e=>{e.preventDefault();
  const n=parseInt(document.getElementById('to').value,10);if(!isNaN(n)){offset=n;keepOffset();load();}};
function renderStats(s){const box=document.getElementById('stats');box.replaceChildren();
  box.append(el('p',{class:'muted'},s.sampled?'statistics of a sample of '+s.sample_size.toLocaleString()+
    ' of '+s.rows.toLocaleString()+' rows':'statistics of all '+s.rows.toLocaleString()+' rows'));
  const t=el('table',{});t.append(el('tr',{},el('th',{},'column'),el('th',{},'kind'),el('th',{},'nulls'),
    el('th',{},'distribution')));
  for(const [name,c] of Object.entries(s.columns)){let d=el('span',{});
    const h=c.histogram||c.length_histogram;
    if(h&&h.counts.length){const m=Math.max(...h.counts);d=el('div',{class:'hist',
      title:h.edges[0]+' .. '+h.edges[h.edges.length-1]});
      for(const n of h.counts){const b=el('div',{});b.style.height=(100*n/m)+'%';d.append(b);}}
    else if(c.counts){d=el('span',{},c.counts.slice(0,10).map(([k,n])=>k+': '+n).join(', '));}
    t.append(el('tr',{},el('td',{},name),el('td',{},c.kind),el('td',{},c.nulls),el('td',{},d)));}
  box.append(t);}
function renderCard(card){const box=document.getElementById('card');
  if(card.description)box.append(el('p',{},card.description));
  const facts=el('p',{class:'muted'});
  if(card.homepage)facts.append(el('a',{href:card.homepage,rel:'noreferrer'},card.homepage),' ');
  if(card.license)facts.append('license: '+card.license+' ');
  if(card.num_examples)facts.append('rows per split: '+Object.entries(card.num_examples)
    .map(([k,n])=>k+' '+n.toLocaleString()).join(', '));
  box.append(facts);if(card.citation)box.append(el('pre',{class:'muted'},card.citation));}
getJSON('/api/caches/'+ID).then(c=>{document.getElementById('title').textContent=
  c.name+' / '+c.config+' / '+c.split+' ('+c.layout+', '+c.rows.toLocaleString()+' rows, '+size(c.bytes)+')';
  renderCard(c.card||{});});
load();
getJSON('/api/caches/'+ID+'/stats').then(renderStats).catch(e=>{
  document.getElementById('stats').textContent=e.message;});
"""


def _page(title: str, body: str, script: str, body_attrs: str = "") -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body{body_attrs}>{body}"
            f"<script>{SCRIPT_COMMON}{script}</script></body></html>")


def list_page(root: str) -> str:
    headers = "".join(f"<th data-sort='{key}'>{label}</th>" for key, label in (
        ("name", "name"), ("config", "config"), ("split", "split"), ("layout", "layout"), ("rows", "rows"),
        ("bytes", "size"), ("status", "status"), ("age_seconds", "age"), ("inputs", "inputs")))
    body = (f"<h1>stable-datasets caches</h1><p class='muted'>{escape(root)}</p><p id='empty'></p>"
            "<p><input id='search' type='search' placeholder='search' size='30'> <select id='status-filter'>"
            "<option value=''>every status</option></select> <span id='count' class='muted'></span></p>"
            f"<table id='caches'><tr>{headers}</tr></table>")
    return _page("stable-datasets caches", body, LIST_SCRIPT)


def cache_page(cache_id: str) -> str:
    body = ("<p><a href='/'>all caches</a></p><h1 id='title'>cache</h1><div id='card'></div>"
            "<p><button id='prev'>previous</button> <button id='next'>next</button> "
            "<form id='jump' style='display:inline'>row <input id='to' size='8'> <button>go</button></form> "
            "<span id='status'></span></p><table id='rows'></table><h2>columns</h2><div id='stats'>computing...</div>")
    return _page("stable-datasets cache", body, CACHE_SCRIPT, f" data-cache='{escape(cache_id)}'")
