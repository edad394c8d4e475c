# ruff: noqa: E501  (generated markup is kept on its real, long lines)
"""Pages as static-site generators build them, and a Chinese Markdown book, for the tests.

Each site reproduces its generator's markup around the text: MkDocs/Material and Sphinx
(``<a class="headerlink" href="#x">¶</a>`` in headings, Pygments line numbers), Hugo (Docsy's
empty self-link, a theme's leading ``<a class="anchor">#</a>``, Chroma's line-number table),
Docusaurus (``<a class="hash-link">`` with a zero-width space, the page title in an article's
``<header>``, an in-page table of contents) and VitePress (``<a class="header-anchor">``, the
code-language label). Every ``<title>`` but the home page's ends with the site's name.
``ES6_BOOK`` is Markdown in the shape of ruanyf/es6tutorial: Chinese headings and prose,
fenced code with ``javascript`` info strings, a long section cut into overlapping chunks.
"""

from __future__ import annotations

from pathlib import Path

_HEAD = (
    '<!doctype html>\n<html lang="{lang}"><head><meta charset="utf-8">'
    '<link rel="icon" href="data:,"><title>{title}</title></head>\n'
)

MKDOCS = {
    "index.html": _HEAD.format(lang="en", title="Material for MkDocs") + """<body>
<a href="#material-for-mkdocs" class="md-skip">Skip to content</a>
<header class="md-header"><nav class="md-header__inner">Material for MkDocs</nav></header>
<main class="md-main"><div class="md-sidebar"><nav class="md-nav">Home Setup</nav></div>
<article class="md-content__inner md-typeset">
<h1 id="material-for-mkdocs">Material for MkDocs<a class="headerlink" href="#material-for-mkdocs" title="Permanent link">&para;</a></h1>
<p>Write your documentation in Markdown and create a professional static site for your project.</p>
</article></main></body></html>
""",
    "setup/changing-the-colors/index.html": _HEAD.format(
        lang="en", title="Changing the colors - Material for MkDocs"
    ) + """<body>
<header class="md-header"><nav>Material for MkDocs</nav></header>
<main class="md-main"><nav class="md-nav md-nav--secondary">Configuration Color palette</nav>
<article class="md-content__inner md-typeset">
<h1 id="changing-the-colors">Changing the colors<a class="headerlink" href="#changing-the-colors" title="Permanent link">&para;</a></h1>
<p>As any proper Material Design implementation, Material for MkDocs supports Google's original
color palette, which can be easily configured through mkdocs.yml.</p>
<h2 id="configuration">Configuration<a class="headerlink" href="#configuration" title="Permanent link">&para;</a></h2>
<h3 id="color-palette">Color palette<a class="headerlink" href="#color-palette" title="Permanent link">&para;</a></h3>
<p>The primary color is used for the header, the sidebar, text links and several other
components. Set the primary color scheme in mkdocs.yml:</p>
<div class="language-yaml highlight"><span class="filename">mkdocs.yml</span><pre><span></span><code><span class="linenos" data-linenos="1 ">1</span><span class="nt">theme</span><span class="p">:</span>
<span class="linenos" data-linenos="2 ">2</span><span class="w">  </span><span class="nt">palette</span><span class="p">:</span>
<span class="linenos" data-linenos="3 ">3</span><span class="w">    </span><span class="nt">primary</span><span class="p">:</span><span class="w"> </span><span class="l l-Scalar">indigo</span>
</code></pre><button class="md-clipboard md-icon" title="Copy to clipboard"></button></div>
</article></main>
<footer class="md-footer">Made with Material for MkDocs</footer></body></html>
""",
    "setup/setting-up-versioning/index.html": _HEAD.format(
        lang="en", title="Setting up versioning - Material for MkDocs"
    ) + """<body>
<main class="md-main"><article class="md-content__inner md-typeset">
<h1 id="setting-up-versioning">Setting up versioning<a class="headerlink" href="#setting-up-versioning" title="Permanent link">&para;</a></h1>
<p>Material for MkDocs makes it easy to deploy multiple versions of your project documentation
by integrating with the external utility mike.</p>
<h2 id="version-selector">Version selector<a class="headerlink" href="#version-selector" title="Permanent link">&para;</a></h2>
<p>The version selector lets readers switch between the versions of your documentation. It is
enabled in mkdocs.yml with the extra version provider set to mike.</p>
</article></main></body></html>
""",
}

SPHINX = {
    "usage/installation.html": _HEAD.format(
        lang="en", title="Installing Sphinx — Sphinx documentation"
    ) + """<body>
<div class="related" role="navigation" aria-label="Related"><ul><li><a href="../index.html">Sphinx home</a></li></ul></div>
<div class="document"><div class="body" role="main">
<section id="installing-sphinx">
<h1>Installing Sphinx<a class="headerlink" href="#installing-sphinx" title="Link to this heading">¶</a></h1>
<p>Sphinx is written in Python and supports Python 3.11 and later.</p>
<section id="linux">
<h2>Linux<a class="headerlink" href="#linux" title="Link to this heading">¶</a></h2>
<p>Install the python3-sphinx package with the package manager of your distribution:</p>
<div class="highlight-console notranslate"><div class="highlight"><pre><span></span><span class="linenos">1</span><span class="gp">$ </span>apt-get install python3-sphinx
</pre></div></div>
</section>
</section>
</div></div>
<div class="sphinxsidebar" role="navigation" aria-label="Main"><h3>Navigation</h3><p>Contents Search</p></div>
</body></html>
""",
    "usage/quickstart.html": _HEAD.format(
        lang="en", title="Getting started — Sphinx documentation"
    ) + """<body><div class="body" role="main">
<section id="getting-started">
<h1>Getting started<a class="headerlink" href="#getting-started" title="Link to this heading">¶</a></h1>
<p>Sphinx is a documentation generator that translates reStructuredText into HTML websites.</p>
</section></div></body></html>
""",
}

HUGO = {
    "installation/index.html": _HEAD.format(lang="en", title="Installing Hugo | Hugo") + """<body>
<header><nav class="td-navbar">Hugo</nav></header>
<main role="main" class="td-main"><div class="td-content">
<h1>Installing Hugo</h1>
<h2 id="prerequisites">Prerequisites<a class="td-heading-self-link" href="#prerequisites" aria-label="Heading self-link"></a></h2>
<p>Install Git before installing Hugo, to use Hugo modules and themes from a repository.</p>
<h2><a class="anchor" href="#macos">#</a> macOS</h2>
<p>Install the extended edition of Hugo on macOS with Homebrew:</p>
<div class="highlight"><div class="chroma"><table class="lntable"><tr><td class="lntd">
<pre tabindex="0" class="chroma"><code><span class="lnt">1
</span></code></pre></td><td class="lntd">
<pre tabindex="0" class="chroma"><code class="language-sh" data-lang="sh"><span class="line"><span class="cl">brew install hugo
</span></span></code></pre></td></tr></table></div></div>
</div></main></body></html>
""",
    "getting-started/index.html": _HEAD.format(lang="en", title="Getting started | Hugo") + """<body>
<main role="main"><div class="td-content">
<h1>Getting started</h1>
<h2 id="quick-start">Quick start<a class="td-heading-self-link" href="#quick-start" aria-label="Heading self-link"></a></h2>
<p>Create a new Hugo site, add a theme, then start the development server with hugo server.</p>
</div></main></body></html>
""",
}

DOCUSAURUS = {
    "docs/installation/index.html": _HEAD.format(
        lang="en", title="Installation | Docusaurus"
    ) + """<body>
<nav aria-label="Main" class="navbar">Docusaurus Docs Blog</nav>
<div class="main-wrapper"><aside class="theme-doc-sidebar-container"><nav class="menu">Introduction Installation</nav></aside>
<main class="docMainContainer"><article><div class="theme-doc-markdown markdown">
<header><h1>Installation</h1></header>
<p>Docusaurus is essentially a set of npm packages.</p>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="requirements">Requirements<a href="#requirements" class="hash-link" aria-label="Direct link to Requirements" title="Direct link to Requirements">&#8203;</a></h2>
<p>Node.js version 18.0 or above is required to scaffold a project.</p>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="scaffold-project-website">Scaffold project website<a href="#scaffold-project-website" class="hash-link" aria-label="Direct link to Scaffold project website">&#8203;</a></h2>
<p>The easiest way to install Docusaurus is to scaffold a skeleton website with the classic template:</p>
<div class="language-bash codeBlockContainer_Ckt0 theme-code-block"><div class="codeBlockContent_biex"><pre tabindex="0" class="prism-code language-bash codeBlock_bY9V"><code class="codeBlockLines_e6Vv"><span class="token-line"><span class="token plain">npx create-docusaurus@latest my-website classic</span><br></span></code></pre>
<div class="buttonGroup__atx"><button type="button" aria-label="Copy code to clipboard" title="Copy" class="clean-btn"><span aria-hidden="true"><svg viewBox="0 0 24 24"><path d="M0"></path></svg></span></button></div></div></div>
</div></article>
<div class="col col--3"><div class="tableOfContents_bqdL"><ul class="table-of-contents"><li><a href="#requirements" class="table-of-contents__link">Requirements</a></li><li><a href="#scaffold-project-website" class="table-of-contents__link">Scaffold project website</a></li></ul></div></div>
</main></div>
<footer class="footer">Copyright Meta Platforms</footer></body></html>
""",
    "docs/deployment/index.html": _HEAD.format(lang="en", title="Deployment | Docusaurus") + """<body>
<main class="docMainContainer"><article><div class="theme-doc-markdown markdown">
<header><h1>Deployment</h1></header>
<p>To build the static files of your website for production, run npm run build.</p>
</div></article></main></body></html>
""",
}

VITEPRESS = {
    "guide/getting-started.html": _HEAD.format(
        lang="en-US", title="Getting Started | VitePress"
    ) + """<body><div id="app">
<header class="VPNav"><div class="VPNavBar">VitePress Guide Reference</div></header>
<aside class="VPSidebar"><nav class="nav">Introduction Getting Started</nav></aside>
<div class="VPDoc"><main class="main"><div class="vp-doc _guide_getting-started">
<h1 id="getting-started" tabindex="-1">Getting Started <a class="header-anchor" href="#getting-started" aria-label="Permalink to &quot;Getting Started&quot;">&#8203;</a></h1>
<h2 id="installation" tabindex="-1">Installation <a class="header-anchor" href="#installation" aria-label="Permalink to &quot;Installation&quot;">&#8203;</a></h2>
<p>VitePress can be used on its own, or be installed into an existing project:</p>
<div class="language-sh vp-adaptive-theme"><button title="Copy Code" class="copy"></button><span class="lang">sh</span><pre class="shiki shiki-themes github-light github-dark vp-code" tabindex="0"><code><span class="line"><span>npm add -D vitepress</span></span></code></pre></div>
</div></main></div></div></body></html>
""",
    "guide/deploy.html": _HEAD.format(lang="en-US", title="Deploy Your VitePress Site | VitePress")
    + """<body><div id="app"><div class="VPDoc"><main class="main"><div class="vp-doc">
<h1 id="deploy" tabindex="-1">Deploy Your VitePress Site <a class="header-anchor" href="#deploy" aria-label="Permalink to &quot;Deploy&quot;">&#8203;</a></h1>
<p>The build command writes the static site into the dist directory, ready for any static host.</p>
</div></main></div></div></body></html>
""",
}

#: Every generator's site, by name: {relative path: page}.
GENERATOR_SITES = {
    "mkdocs": MKDOCS, "sphinx": SPHINX, "hugo": HUGO, "docusaurus": DOCUSAURUS,
    "vitepress": VITEPRESS,
}

# A long section of overlapping chunks: the same words in every paragraph.
_SCOPE = "\n\n".join(
    f"第{n}段：块级作用域中，let 声明的变量只在它所在的代码块内有效，暂时性死区让 typeof 不再是一个百分之百安全的操作。"
    for n in range(1, 13)
)

ES6_BOOK = {
    "docs/let.md": """# let 和 const 命令

## let 命令

### 基本用法

ES6 新增了`let`命令，用来声明变量。它的用法类似于`var`，但是所声明的变量，只在`let`命令所在的代码块内有效。

```javascript
{
  let a = 10;
  var b = 1;
}
```

### 暂时性死区

只要块级作用域内存在`let`命令，它所声明的变量就“绑定”这个区域，不再受外部的影响。

```javascript
typeof x; // ReferenceError
let x;
```

上面代码中，变量`x`使用`let`命令声明，所以在声明之前，都属于`x`的“死区”，typeof 运算符会抛出错误。

## 块级作用域

""" + _SCOPE + "\n",
    "docs/destructuring.md": """# 变量的解构赋值

## 数组的解构赋值

ES6 允许按照一定模式，从数组和对象中提取值，对变量进行赋值，这被称为解构。

```javascript
let [a, b, c] = [1, 2, 3];
```

## 对象的解构赋值

解构不仅可以用于数组，还可以用于对象。对象的属性没有次序，变量必须与属性同名。
""",
    "docs/promise.md": """# Promise 对象

## Promise 的含义

Promise 是异步编程的一种解决方案，比传统的解决方案回调函数和事件更合理和更强大。

```javascript
const promise = new Promise(function(resolve, reject) {
  resolve(value);
});
```
""",
}


def write_pages(root: Path, pages: dict[str, str]) -> Path:
    """Write ``pages`` ({relative path: text}) under ``root``; returns ``root``."""
    for rel, text in pages.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
