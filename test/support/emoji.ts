// Lengths are counted in code points; this emoji is one character and two UTF-16 units, so a
// count in units would refuse these bodies at half their bound.
export const EMOJI = '\u{1F600}';

// Message bodies at every bound, accepted by every door that posts.
export const POSTS_AT_BOUNDS = [{ content: EMOJI.repeat(200) }, { content: EMOJI.repeat(10_000), summary: EMOJI.repeat(200) }];

// Message bodies one past a bound, each with the sentence every door refuses it with.
export const POSTS_PAST_BOUNDS = [
  [{ content: EMOJI.repeat(10_001), summary: 's' }, 'content must be at most 10000 characters', 'content'],
  [{ content: 'x', summary: EMOJI.repeat(201) }, 'summary must be at most 200 characters', 'summary'],
  [{ content: EMOJI.repeat(201) }, 'summary is required when content is longer than 200 characters; add one and resend', 'summary'],
] as const;
