// The words of <ragspine-search>, per language: English, Simplified and Traditional Chinese.
//
// A string is a template: {count}, {query}, {error}, {title}, {phase}, {size}, {loaded},
// {total} are filled in; a key with ".one"/".other" forms is picked by Intl.PluralRules.
// Any string can be overridden per element (the `strings` attribute, a JSON object, or the
// `strings` property): <ragspine-search strings='{"more": "Show more"}'>.

export const STRINGS = {
  en: {
    search: "Search",
    placeholder: "Search",
    loading: "Loading search…",
    "loading.progress": "Loading search: {phase}{size}…",
    "loading.size": " ({loaded} of {total} MB)",
    "loading.label": "Loading the search",
    unavailable: "Search is unavailable",
    "start.failed": "The search could not start: {error}",
    "sites.failed": "{count} of the sites could not be searched: {error}",
    failed: "Search failed: {error}",
    "results.one": "{count} page for “{query}”",
    "results.other": "{count} pages for “{query}”",
    none: "No results for “{query}”.",
    "none.filtered": "No results for “{query}” with these filters.",
    "held.one": "{count} matching result from your own documents is held back: it is never shown.",
    "held.other": "{count} matching results from your own documents are held back: they are never shown.",
    more: "More results",
    "more.in": "More in {title}",
    mine: "your document",
    try: "Try:",
    close: "Close (Esc)",
    "results.label": "Search results",
    mode: "Search mode",
    hybrid: "hybrid",
    bm25: "BM25",
    "hybrid.title": "Keywords and meaning (BM25 + embeddings)",
    "bm25.title": "Keywords only (BM25)",
    "lane.loading": "Keyword results — semantic search loading…",
    "lane.ready": "Keyword results — semantic search ready",
    "lane.hybrid": "Keyword + semantic results",
    "lane.bm25": "Keyword results",
    "lane.failed": "Keyword results — semantic search unavailable",
    filters: "Filters",
    "filters.active": "Filters ({count})",
    any: "Any",
    "filters.clear": "Clear filters",
    "facet.language": "Language",
    "facet.topic": "Topic",
    "facet.entity": "Entity",
    "facet.geography": "Region",
    "facet.period": "Period",
  },
  "zh-CN": {
    search: "搜索",
    placeholder: "搜索",
    loading: "正在加载搜索…",
    "loading.progress": "正在加载搜索{size}…",
    "loading.size": "（{loaded} / {total} MB）",
    "loading.label": "正在加载搜索",
    unavailable: "搜索不可用",
    "start.failed": "搜索无法启动：{error}",
    "sites.failed": "有 {count} 个站点无法搜索：{error}",
    failed: "搜索失败：{error}",
    "results.other": "找到 {count} 个与“{query}”相关的页面",
    none: "未找到与“{query}”相关的结果。",
    "none.filtered": "在当前筛选条件下，未找到与“{query}”相关的结果。",
    "held.other": "有 {count} 条匹配结果来自您自己的受限文档，已隐藏，不会显示。",
    more: "更多结果",
    "more.in": "{title} 中的更多内容",
    mine: "您的文档",
    try: "试试：",
    close: "关闭（Esc）",
    "results.label": "搜索结果",
    mode: "搜索模式",
    hybrid: "混合",
    bm25: "BM25",
    "hybrid.title": "关键词与语义（BM25 + 向量）",
    "bm25.title": "仅关键词（BM25）",
    "lane.loading": "关键词结果 — 语义搜索加载中…",
    "lane.ready": "关键词结果 — 语义搜索已就绪",
    "lane.hybrid": "关键词 + 语义结果",
    "lane.bm25": "关键词结果",
    "lane.failed": "关键词结果 — 语义搜索不可用",
    filters: "筛选",
    "filters.active": "筛选（{count}）",
    any: "全部",
    "filters.clear": "清除筛选",
    "facet.language": "语言",
    "facet.topic": "主题",
    "facet.entity": "实体",
    "facet.geography": "地区",
    "facet.period": "时期",
  },
  "zh-TW": {
    search: "搜尋",
    placeholder: "搜尋",
    loading: "正在載入搜尋…",
    "loading.progress": "正在載入搜尋{size}…",
    "loading.size": "（{loaded} / {total} MB）",
    "loading.label": "正在載入搜尋",
    unavailable: "搜尋無法使用",
    "start.failed": "搜尋無法啟動：{error}",
    "sites.failed": "有 {count} 個網站無法搜尋：{error}",
    failed: "搜尋失敗：{error}",
    "results.other": "找到 {count} 個與「{query}」相關的頁面",
    none: "找不到與「{query}」相關的結果。",
    "none.filtered": "在目前的篩選條件下，找不到與「{query}」相關的結果。",
    "held.other": "有 {count} 筆相符結果來自您自己的受限文件，已隱藏，不會顯示。",
    more: "更多結果",
    "more.in": "{title} 中的更多內容",
    mine: "您的文件",
    try: "試試：",
    close: "關閉（Esc）",
    "results.label": "搜尋結果",
    mode: "搜尋模式",
    hybrid: "混合",
    bm25: "BM25",
    "hybrid.title": "關鍵字與語意（BM25 + 向量）",
    "bm25.title": "僅關鍵字（BM25）",
    "lane.loading": "關鍵字結果 — 語意搜尋載入中…",
    "lane.ready": "關鍵字結果 — 語意搜尋已就緒",
    "lane.hybrid": "關鍵字 + 語意結果",
    "lane.bm25": "關鍵字結果",
    "lane.failed": "關鍵字結果 — 語意搜尋無法使用",
    filters: "篩選",
    "filters.active": "篩選（{count}）",
    any: "全部",
    "filters.clear": "清除篩選",
    "facet.language": "語言",
    "facet.topic": "主題",
    "facet.entity": "實體",
    "facet.geography": "地區",
    "facet.period": "時期",
  },
};

const TRADITIONAL = /^zh-(hant|tw|hk|mo)\b/i;

/** The STRINGS key for a BCP 47 tag: zh-Hant/zh-TW/zh-HK/zh-MO → zh-TW, other zh → zh-CN,
 *  else the tag or its primary language when STRINGS has it, else en. */
export function uiLanguage(tag) {
  const value = String(tag || "").trim().replace(/_/g, "-");
  if (!value) return "en";
  if (STRINGS[value]) return value;
  const primary = value.split("-")[0].toLowerCase();
  if (primary === "zh") return TRADITIONAL.test(value) ? "zh-TW" : "zh-CN";
  return STRINGS[primary] ? primary : "en";
}

function fill(template, vars) {
  return template.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

/**
 * t(key, vars) for a language, with per-string overrides ({key: template}); a key with
 * plural forms takes vars.count. Falls back to English for a string a language lacks.
 */
export function translator(tag, overrides = {}) {
  const lang = uiLanguage(tag);
  const table = { ...STRINGS.en, ...STRINGS[lang], ...overrides };
  const plurals = new Intl.PluralRules(lang);
  const t = (key, vars = {}) => {
    const form = `${key}.${"count" in vars ? plurals.select(Number(vars.count)) : "other"}`;
    const template = table[key] ?? table[form] ?? table[`${key}.other`] ?? key;
    return fill(template, vars);
  };
  t.lang = lang;
  return t;
}
