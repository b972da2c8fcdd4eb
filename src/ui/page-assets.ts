// The page's files (ui/page/, and uPlot from its package), inlined as strings by
// scripts/embed-ui.mjs, which replaces this module's build output after tsc: the page then ships
// in dist/ and in the single-executable bundle, and nothing is read from disk or fetched at run time.
export interface PageAsset {
  type: string;
  body: string;
}

/** By path (/, /ui/app.js…); empty until the build embeds them. */
export const PAGE_ASSETS: Record<string, PageAsset> = {};
