// Command-line options of the llama.cpp scripts here: --model M.gguf --ids 1,2,3 and the
// script's own numeric options (e.g. {threads: 1, n: 16}, read from --threads and -n).
export function parseArgs(argv, numeric) {
  const a = {...numeric};
  const flag = (k) => (k.length === 2 ? k.slice(1) : k.slice(2));
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--model')
      a.model = v, i++;
    else if (k === '--ids')
      a.ids = v.split(',').filter((s) => s !== '').map(Number), i++;
    else if (k.startsWith('-') && flag(k) in numeric)
      a[flag(k)] = Number(v), i++;
    else
      throw new Error(`unknown argument ${k}`);
  }
  if (!a.model || !a.ids || a.ids.length === 0) throw new Error('need --model and --ids');
  return a;
}
