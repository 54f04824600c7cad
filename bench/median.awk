# median(LIST): the median of a space-separated list of numbers (the mean of the middle two for
# an even count; "" for an empty list). Shared by the bench scripts that print medians of
# repeated runs: they put this file's text in front of their own awk program.
function median(list,   v, m, i, j, x) {
  m = split(list, v, " ")
  if (m == 0) return ""
  for (i = 2; i <= m; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
  return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
