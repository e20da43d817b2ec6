/// The report's style sheet: screen (phone and desktop) and print (two A4 pages). Range colours are
/// the Okabe-Ito colour-blind-safe set; every range also has its own pattern and label, so the page reads
/// in black and white.
let reportStyle = """
:root{--ink:#1b1b1b;--muted:#5a5a5a;--line:#c9c9c9;--paper:#fff;--band:#eef4f1;
--vlow:#8b1a1a;--low:#d55e00;--target:#009e73;--high:#f0e442;--vhigh:#e69f00;
--p90:#c6dbef;--p75:#6baed6;--p50:#08306b}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:#f4f4f2;color:var(--ink);font:15px/1.4 "DejaVu Sans",Verdana,"Liberation Sans",Arial,sans-serif}
main{max-width:900px;margin:0 auto;padding:12px}
.page{background:var(--paper);border:1px solid var(--line);border-radius:6px;padding:16px 18px;margin-bottom:14px}
h1{font-size:1.45em;margin:0 0 2px}
h2{font-size:1.02em;margin:14px 0 6px;padding-bottom:2px;border-bottom:2px solid var(--ink);text-transform:uppercase;letter-spacing:.04em}
h2 small{font-weight:normal;text-transform:none;letter-spacing:0;color:var(--muted);font-size:.85em}
.who{font-size:1.1em;margin:0 0 8px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0;font-size:.92em}
dl.meta dt{color:var(--muted)}
dl.meta dd{margin:0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(98px,1fr));gap:6px}
.card{border:1px solid var(--line);border-radius:5px;padding:6px 9px}
.card b{display:block;font-size:1.45em;line-height:1.15}
.card span{color:var(--muted);font-size:.82em}
.tir{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.25fr);gap:14px;align-items:center}
.summary{display:grid;grid-template-columns:minmax(0,1.1fr) minmax(0,1fr);gap:16px;align-items:start}
.summary .tir{grid-template-columns:1fr;gap:4px}
.summary .tir table{font-size:.82em}
.summary .tir svg{max-height:220px}
.compare td:first-child{color:var(--muted)}
.compare td,.compare th{padding:2px 6px}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:bold;background:#f0f0ee}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:14px;height:14px;border:1px solid var(--ink);vertical-align:-2px;margin-right:6px}
svg{display:block;width:100%;height:auto;font-family:inherit}
svg text{fill:var(--ink)}
.axis{stroke:var(--ink);stroke-width:1}
.grid{stroke:#b5b5b5;stroke-width:.6;stroke-dasharray:3 3}
.tband{fill:url(#pat-target-band);stroke:var(--target);stroke-width:.8}
.b90{fill:var(--p90);stroke:#7aa6cc;stroke-width:.5}
.b75{fill:var(--p75);stroke:#2f6f9f;stroke-width:.5}
.med{fill:none;stroke:var(--p50);stroke-width:2.4;stroke-linejoin:round}
.pt,.dpt{stroke:#fff;stroke-width:.8}
.r-target{fill:#1b1b1b}
.r-low,.r-veryLow{fill:var(--low);stroke:#000}
.r-veryLow{fill:var(--vlow)}
.r-high{fill:#8a6d00;stroke:#000}
.r-veryHigh{fill:var(--vhigh);stroke:#000}
.hilo{font-size:9px;font-weight:bold}
.lowring{fill:none;stroke:var(--vlow);stroke-width:1.2}
.days{display:grid;grid-template-columns:repeat(7,minmax(0,1fr));gap:4px}
.day{border:1px solid var(--line);border-radius:4px;padding:2px 3px 1px}
.day header{display:flex;justify-content:space-between;font-size:.72em;line-height:1.2}
.day header .n{color:var(--muted)}
.day.empty{background:repeating-linear-gradient(135deg,#fff 0 5px,#f1f1f1 5px 7px)}
.lowflag{font-weight:bold;color:var(--vlow)}
.logbook{table-layout:fixed}
.logbook col.day{width:6.6em}
.logbook td{font-size:.86em;white-space:normal;overflow-wrap:anywhere}
.logbook td.date{font-weight:bold;white-space:nowrap}
.v{display:inline-block;margin-right:5px;white-space:nowrap}
.v.low{font-weight:bold;text-decoration:underline}
.v.high{font-style:italic}
.tag{color:var(--muted);font-size:.8em}
.lows{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:4px 16px;align-items:start}
.lows td,.lows th{padding:2px 5px;white-space:nowrap}
.note{color:var(--muted);font-size:.84em;margin:4px 0 0}
.scroll{overflow-x:auto}
footer{color:var(--muted);font-size:.78em;margin-top:10px}
@media (max-width:640px){
 body{font-size:14px}
 main{padding:4px}
 .page{padding:10px}
 .tir,.summary,.summary .tir{grid-template-columns:1fr}
 .days{grid-template-columns:repeat(3,minmax(0,1fr))}
 svg.agp{min-width:600px}
}
@media print{
 @page{size:A4;margin:10mm}
 body{background:#fff;font-size:9pt}
 main{max-width:none;padding:0}
 .page{border:0;border-radius:0;padding:0;margin:0}
 .page1{break-after:page}
 .summary .tir svg{max-height:40mm}
 svg.agp{height:66mm}
 .days svg{max-height:15mm}
 .lows{grid-template-columns:repeat(3,minmax(0,1fr));gap:2px 8px}
 .lows table{font-size:.78em}
 .lows td,.lows th{padding:1px 3px}
 .logbook td{font-size:.8em}
 h2{margin:8px 0 4px}
 .card b{font-size:1.3em}
 .days{grid-template-columns:repeat(7,minmax(0,1fr))}
 section,.day,tr{break-inside:avoid}
 .scroll{overflow:visible}
 svg.agp{min-width:0}
 *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""

/// Fill patterns (one per range) and the target band's hatching, shared by every chart of the page.
let reportPatterns = """
<svg width="0" height="0" style="position:absolute" aria-hidden="true" focusable="false"><defs>\
<pattern id="pat-veryLow" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#8b1a1a"/>\
<path d="M0 0L6 6M6 0L0 6" stroke="#fff" stroke-width="1.2"/></pattern>\
<pattern id="pat-low" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#d55e00"/>\
<path d="M0 6L6 0" stroke="#fff" stroke-width="1.3"/></pattern>\
<pattern id="pat-target" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#009e73"/></pattern>\
<pattern id="pat-high" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#f0e442"/>\
<circle cx="3" cy="3" r="1.3" fill="#1b1b1b"/></pattern>\
<pattern id="pat-veryHigh" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#e69f00"/>\
<path d="M0 1.5H6M0 4.5H6" stroke="#1b1b1b" stroke-width="1"/></pattern>\
<pattern id="pat-target-band" width="8" height="8" patternUnits="userSpaceOnUse"><rect width="8" height="8" fill="#e3f3ec"/>\
<path d="M0 8L8 0" stroke="#9fd3bd" stroke-width=".8"/></pattern>\
</defs></svg>
"""
